package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// A policy's AttemptTimeout cuts an attempt short long before the
// dispatcher's own bound (5s in these tests), and the cut attempt is
// retried like any other timeout.
func TestAttemptTimeoutBoundsEachCall(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	tg.block = make(chan struct{}) // no answer until the test ends
	t.Cleanup(func() { close(tg.block) })
	p := fast(2)
	p.AttemptTimeout = 100 * time.Millisecond
	putPolicy(t, st, "p", p)
	task := addTask(t, st, tg.URL, "p")
	start(t, st, options{})

	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Exhausted || !strings.HasSuffix(got.LastError, "("+retry.ErrAttemptsExhausted.Error()+")") {
		t.Fatalf("task %s (%q), want EXHAUSTED after two timed-out attempts", got.Status, got.LastError)
	}
	for _, a := range attempts(t, st, task.ID) {
		if a.Duration < p.AttemptTimeout || a.Duration > 2*time.Second {
			t.Errorf("attempt %d took %v, want about %v", a.AttemptNumber, a.Duration, p.AttemptTimeout)
		}
	}
}
