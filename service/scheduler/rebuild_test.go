package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// slowListing is a store whose TaskDue, having reported every live task,
// returns only when ctx ends: the listing of a very large store.
type slowListing struct{ store.Store }

func (s slowListing) TaskDue(ctx context.Context, each func(store.Due)) error {
	if err := s.Store.TaskDue(ctx, each); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// A task due at start is sent while the heap is still being rebuilt: a
// restart must not hold every task back for the seconds a million take to
// list (issue 19).
func TestClaimsWhileTheHeapIsRebuilt(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "once", fast(1))
	task := addTask(t, st, tg.URL, "once")
	start(t, slowListing{st}, options{cfg: schedulerConfig(time.Hour)})
	if done := waitFor(t, st, task.ID, terminal); done.Status != store.Succeeded {
		t.Fatalf("task %s, want SUCCEEDED", done.Status)
	}
}
