package scheduler_test

import (
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// A task of the policy "default", which its tenant never registered, runs
// on the built-in one: a 503 is retried after at most its first delay (1 s,
// full jitter), where an unknown policy would fail the task at once.
func TestBuiltinDefaultPolicy(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 200)
	task := addTask(t, st, tg.URL, store.DefaultPolicyID)
	start(t, st, options{cfg: schedulerConfig(time.Second)})
	done := waitFor(t, st, task.ID, terminal)
	if done.Status != store.Succeeded || done.AttemptNumber != 2 {
		t.Fatalf("task = %s after %d attempts (%q), want SUCCEEDED after 2", done.Status, done.AttemptNumber, done.LastError)
	}
	as := attempts(t, st, task.ID)
	if gap := as[1].StartedAt.Sub(as[0].StartedAt.Add(as[0].Duration)); gap > time.Second+500*time.Millisecond {
		t.Errorf("the retry came %v after the first attempt, want at most the built-in's 1 s (and some slack)", gap)
	}
}

// A tenant's own "default" replaces the built-in: one attempt, not ten.
func TestOwnDefaultPolicy(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	putPolicy(t, st, store.DefaultPolicyID, retry.Policy{MaxAttempts: 1})
	tg := newTarget(t, 503)
	task := addTask(t, st, tg.URL, store.DefaultPolicyID)
	start(t, st, options{cfg: schedulerConfig(time.Second)})
	done := waitFor(t, st, task.ID, terminal)
	if done.Status != store.Exhausted || done.AttemptNumber != 1 {
		t.Errorf("task = %s after %d attempts, want EXHAUSTED after the 1 its tenant's default allows", done.Status, done.AttemptNumber)
	}
}
