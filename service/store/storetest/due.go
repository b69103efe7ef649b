package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// due collects what TaskDue reports.
func due(t *testing.T, s store.Store) map[string]store.Due {
	t.Helper()
	out := map[string]store.Due{}
	err := s.TaskDue(context.Background(), func(d store.Due) {
		if _, twice := out[d.ID]; twice {
			t.Errorf("TaskDue reported %s twice", d.ID)
		}
		out[d.ID] = d
	})
	if err != nil {
		t.Fatalf("TaskDue() = %v", err)
	}
	return out
}

func testTaskDue(t *testing.T, newStore NewStore) {
	t.Run("live tasks and when they are due", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		now := create(t, s, newTask(tenant, "now"))
		laterIn := newTask("tenant-b", "later")
		laterIn.NextAttemptAt = t0.Add(time.Hour)
		later := create(t, s, laterIn)
		leased := claimOne(t, s, t0, create(t, s, newTask(tenant, "leased")).ID)
		retry := claimOne(t, s, t0, create(t, s, newTask(tenant, "retry")).ID)
		finish(t, s, retry, store.Pending, t0) // due a second later
		finish(t, s, claimOne(t, s, t0, create(t, s, newTask(tenant, "done")).ID), store.Succeeded, t0)
		if _, err := cancel(s, tenant, create(t, s, newTask(tenant, "cancelled")).ID, t0); err != nil {
			t.Fatal(err)
		}
		got := due(t, s)
		want := []store.Due{{ID: now.ID, At: t0, Version: 1}, {ID: later.ID, At: t0.Add(time.Hour), Version: 1},
			{ID: leased.ID, At: leased.LeaseUntil, Version: leased.Version},
			{ID: retry.ID, At: t0.Add(time.Second), Version: retry.Version + 1}}
		if len(got) != len(want) {
			t.Errorf("TaskDue reported %d tasks, want %d: %v", len(got), len(want), got)
		}
		for _, w := range want {
			if g, ok := got[w.ID]; !ok || !sameTime(g.At, w.At) || g.Version != w.Version {
				t.Errorf("TaskDue: %s at %v v%d (reported %v), want %v v%d", w.ID, g.At, g.Version, ok, w.At, w.Version)
			}
		}
	})
	t.Run("more than a batch", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		const n = store.DueBatch + 3
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					if _, _, err := s.TaskCreate(context.Background(), newTask(tenant, fmt.Sprintf("k%d", i))); err != nil {
						t.Errorf("TaskCreate = %v", err)
					}
				}
			})
		}
		wg.Wait()
		if got := due(t, s); len(got) != n {
			t.Fatalf("TaskDue reported %d tasks, want %d", len(got), n)
		}
	})
}
