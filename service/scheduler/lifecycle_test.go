package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

func TestRestartBetweenAttemptsLosesNothing(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 503, 200)
	putPolicy(t, st, "p", retry.Policy{MaxAttempts: 5, Backoff: backoffFixed(300 * time.Millisecond)})
	task := addTask(t, st, tg.URL, "p")

	_, stop := start(t, st, options{})
	waitFor(t, st, task.ID, func(task *store.Task) bool { return task.AttemptNumber == 1 && task.Status == store.Pending })
	stop()
	// Attempt 2 may have been claimed ahead of its due time before the
	// stop, and then sent during the shutdown's grace.
	if n := len(tg.seen()); n != 1 && n != 2 {
		t.Fatalf("target saw %d requests before the restart, want 1 or 2", n)
	}

	start(t, st, options{})
	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Succeeded || got.AttemptNumber != 3 {
		t.Fatalf("task = %s after %d attempts, want SUCCEEDED after 3", got.Status, got.AttemptNumber)
	}
	if n := len(tg.seen()); n != 3 {
		t.Fatalf("target saw %d requests, want 3", n)
	}
	for i, a := range attempts(t, st, task.ID) {
		if a.AttemptNumber != i+1 || a.ErrorMessage == store.LeaseExpiredMessage {
			t.Fatalf("attempt log entry %d = %+v: want attempts 1, 2, 3, none lost", i, a)
		}
	}
}

func TestExpiredLeaseIsReclaimedAndCounted(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, tg.URL, "p")
	// A worker that claims and then dies.
	claimed, err := st.TaskClaim(context.Background(), store.ClaimParams{Now: time.Now(), Lease: 300 * time.Millisecond, IDs: []string{task.ID}})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %d tasks, %v", len(claimed), err)
	}

	start(t, st, options{})
	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Succeeded || got.AttemptNumber != 2 {
		t.Fatalf("task = %s after %d attempts, want SUCCEEDED after 2 (one lost)", got.Status, got.AttemptNumber)
	}
	log := attempts(t, st, task.ID)
	if len(log) != 2 || log[0].ErrorMessage != store.LeaseExpiredMessage || log[1].ResponseStatus != 200 {
		t.Fatalf("attempt log %+v, want the lost attempt then the success", log)
	}
}

func TestLostAttemptsCanExhaustWithoutACall(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "p", fast(1))
	task := addTask(t, st, tg.URL, "p")
	if _, err := st.TaskClaim(context.Background(), store.ClaimParams{Now: time.Now(), Lease: 100 * time.Millisecond, IDs: []string{task.ID}}); err != nil {
		t.Fatal(err)
	}

	start(t, st, options{})
	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Exhausted {
		t.Fatalf("status %s, want EXHAUSTED: the one allowed attempt was lost", got.Status)
	}
	if n := len(tg.seen()); n != 0 {
		t.Fatalf("target saw %d requests, want none", n)
	}
}

func TestShutdownReleasesAttemptsInFlight(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	tg.block = make(chan struct{})
	defer close(tg.block)
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, tg.URL, "p")
	cfg := schedulerConfig(time.Hour)
	cfg.ShutdownGrace = 100 * time.Millisecond
	_, stop := start(t, st, options{cfg: cfg})
	waitFor(t, st, task.ID, func(task *store.Task) bool { return task.Status == store.InFlight })
	tg.waitSeen(t, 1)
	stop()

	got, err := st.TaskGet(context.Background(), tenant, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Pending || got.AttemptNumber != 1 {
		t.Fatalf("after shutdown: %s, attempt %d; want PENDING after 1", got.Status, got.AttemptNumber)
	}
	if !strings.HasPrefix(got.LastError, "interrupted") {
		t.Fatalf("lastError %q, want the interruption", got.LastError)
	}
}

func TestShutdownWaitsForAttemptsInFlight(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	tg.block = make(chan struct{})
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, tg.URL, "p")
	_, stop := start(t, st, options{})
	tg.waitSeen(t, 1)
	time.AfterFunc(50*time.Millisecond, func() { close(tg.block) })
	stop()

	got, err := st.TaskGet(context.Background(), tenant, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Succeeded {
		t.Fatalf("after shutdown: %s, want SUCCEEDED (the attempt was let finish)", got.Status)
	}
}

// TestShutdownBeforeStartIsNoError: a retryd stopped while its scheduler
// still rebuilds its heap (the store call sees ctx cancelled) shuts down;
// it does not fail.
func TestShutdownBeforeStartIsNoError(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	addTask(t, st, "http://127.0.0.1:1/", "default")
	s, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: dispatch.New(dispatch.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Errorf("Run with ctx ended = %v, want nil", err)
	}
}
