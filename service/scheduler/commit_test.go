package scheduler_test

import (
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// TestCommitWaitsOnlyWhenNothingIsDueSoon: an outcome that ends its task
// waits up to CommitWait for company before it is recorded, while one
// that leaves its task due soon is recorded at once, with whatever
// gathered before it, so that its retry is sent on time. CommitWait and
// the lease are an hour, so neither can pass by chance on a slow machine:
// an outcome that ends its task is held as long as the test looks, and a
// retry that waited for CommitWait would never come.
func TestCommitWaitsOnlyWhenNothingIsDueSoon(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	ok, retried := newTarget(t, 200), newTarget(t, 503, 200)
	putPolicy(t, st, "p", retry.Policy{MaxAttempts: 3, Backoff: backoffFixed(time.Millisecond)})
	done := addTask(t, st, ok.URL, "p")
	s, stop := start(t, st, options{cfg: scheduler.Config{CommitWait: time.Hour, Lease: time.Hour}})

	ok.waitSeen(t, 1)
	time.Sleep(200 * time.Millisecond)
	if got := get(t, st, done.ID); got.Status != store.InFlight {
		t.Fatalf("a task whose attempt succeeded 200ms ago is %s, want IN_FLIGHT: its outcome waits for company", got.Status)
	}

	again := addTask(t, st, retried.URL, "p")
	s.Wake(store.Due{ID: again.ID, At: again.NextAttemptAt, Version: again.Version})
	retried.waitSeen(t, 2)
	// The 503's outcome, due again at once, was recorded without waiting,
	// and ended the group the first task's outcome was in.
	if got := get(t, st, done.ID); got.Status != store.Succeeded {
		t.Fatalf("the first task is %s once a retry's outcome was recorded, want SUCCEEDED", got.Status)
	}
	if got := get(t, st, again.ID); got.Status != store.InFlight || got.AttemptNumber != 2 {
		t.Fatalf("the retried task is %s at attempt %d, want IN_FLIGHT at 2: its success waits for company", got.Status, got.AttemptNumber)
	}
	stop()
	if got := get(t, st, again.ID); got.Status != store.Succeeded || got.AttemptNumber != 2 {
		t.Fatalf("after Run returned, the retried task is %s after %d attempts, want SUCCEEDED after 2", got.Status, got.AttemptNumber)
	}
}

// TestCommitWaitEndsBeforeTheLease: an outcome is recorded before its
// lease runs out, however long CommitWait is.
func TestCommitWaitEndsBeforeTheLease(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	ok := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, ok.URL, "p")
	// The shortest lease the dispatcher's 5s timeout allows.
	start(t, st, options{cfg: scheduler.Config{CommitWait: time.Hour, Lease: 6 * time.Second}})
	if got := waitFor(t, st, task.ID, terminal); got.Status != store.Succeeded || got.AttemptNumber != 1 {
		t.Fatalf("task = %s after %d attempts, want SUCCEEDED after 1, before its lease ran out", got.Status, got.AttemptNumber)
	}
}

// TestCommitWaitEndsWithRun: outcomes still gathering when Run ends are
// recorded before it returns.
func TestCommitWaitEndsWithRun(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	ok := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, ok.URL, "p")
	_, stop := start(t, st, options{cfg: scheduler.Config{CommitWait: time.Hour}})
	ok.waitSeen(t, 1)
	stop()
	if got := get(t, st, task.ID); got.Status != store.Succeeded || got.AttemptNumber != 1 {
		t.Fatalf("after Run returned, the task is %s after %d attempts, want SUCCEEDED after 1", got.Status, got.AttemptNumber)
	}
}
