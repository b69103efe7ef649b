package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// A task written to the store behind the scheduler's back (as another
// instance does) is not run until something tells the scheduler; with the
// periodic resync an hour away, Resync is what does.
func TestResyncFindsTasksWrittenElsewhere(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	s, _ := start(t, st, options{cfg: schedulerConfig(time.Hour)})

	// A first task, woken as the API does, proves Run's start-up resync
	// is over: a task created after it can be found by Resync alone.
	first := addTask(t, st, tg.URL, "p")
	s.Wake(first.Due())
	waitFor(t, st, first.ID, terminal)

	hidden := addTask(t, st, tg.URL, "p")
	time.Sleep(100 * time.Millisecond)
	got, err := st.TaskGet(context.Background(), tenant, hidden.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Pending {
		t.Fatalf("before Resync the unannounced task is %s, want PENDING: nothing told the scheduler of it", got.Status)
	}
	if err := s.Resync(context.Background()); err != nil {
		t.Fatalf("Resync = %v", err)
	}
	got = waitFor(t, st, hidden.ID, terminal)
	if got.Status != store.Succeeded {
		t.Errorf("after Resync the task is %s, want SUCCEEDED", got.Status)
	}
	if keys := tg.seen(); len(keys) != 2 {
		t.Errorf("target saw %d requests, want 2 (one per task)", len(keys))
	}
}
