package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// NewSharedStores makes two stores on the same new, empty data, as two
// retryd instances on one database see it.
type NewSharedStores func(t *testing.T) (first, second store.Store)

// RunShared runs the tests of several instances on one store: each sees
// the other's writes, two never claim the same task at once, a lease
// taken over by one fences the other, and, for a store.Feed, each hears of
// the tasks the other made due. Run closes the stores when each
// subtest ends.
func RunShared(t *testing.T, newStores NewSharedStores) {
	tests := []struct {
		name string
		run  func(*testing.T, store.Store, store.Store)
	}{
		{"SeeEachOther", testSeeEachOther},
		{"ClaimApart", testClaimApart},
		{"LeaseTakenOver", testLeaseTakenOver},
		{"Feed", testFeedShared},
		{"DeadInstance", testDeadInstance},
		{"BeatKeepsLeases", testBeatKeepsLeases},
		{"InstancesAlive", testInstancesAlive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := newStores(t)
			for _, s := range []store.Store{a, b} {
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close() = %v", err)
					}
				})
			}
			tt.run(t, a, b)
		})
	}
}

func testSeeEachOther(t *testing.T, a, b store.Store) {
	tk := create(t, a, newTask(tenant, "k1"))
	if got := get(t, b, tenant, tk.ID); got.IdempotencyKey != "k1" {
		t.Errorf("second store sees key %q, want k1", got.IdempotencyKey)
	}
	again, created, err := b.TaskCreate(context.Background(), newTask(tenant, "k1"))
	if err != nil || created || again.ID != tk.ID {
		t.Errorf("repeat on the second store = %v created %v, %v; want task %s", again, created, err, tk.ID)
	}
	if _, err := cancel(b, tenant, tk.ID, t0); err != nil {
		t.Fatal(err)
	}
	if got := get(t, a, tenant, tk.ID); got.Status != store.Cancelled {
		t.Errorf("first store sees %s, want CANCELLED", got.Status)
	}
	// Each sees the counts of the other's writes (a create on one, a
	// cancel on the other), with its own added.
	create(t, b, newTask(tenant, "k2"))
	for i, s := range []store.Store{a, b} {
		got, err := s.TenantCounts(context.Background(), tenant)
		if err != nil {
			t.Fatalf("TenantCounts on store %d = %v", i+1, err)
		}
		checkCounts(t, fmt.Sprintf("TenantCounts on store %d", i+1), got,
			map[store.Status]int64{store.Pending: 1, store.Cancelled: 1})
	}
}

func testClaimApart(t *testing.T, a, b store.Store) {
	const n = 60
	createN(t, a, tenant, "k", n)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for _, s := range []store.Store{a, b, a, b} {
		wg.Go(func() {
			for {
				got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: t0, Lease: time.Minute, Limit: 5})
				if err != nil {
					t.Errorf("TaskClaim = %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if seen[tk.ID] {
						t.Errorf("task %s claimed twice", tk.ID)
					}
					seen[tk.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("claimed %d tasks, want %d", len(seen), n)
	}
}

func testLeaseTakenOver(t *testing.T, a, b store.Store) {
	tk := create(t, a, newTask(tenant, "k1"))
	first := claimOne(t, a, t0, tk.ID)
	second := claim(t, b, t0.Add(31*time.Second), 1)
	if len(second) != 1 || second[0].AttemptNumber != 2 {
		t.Fatalf("second store's claim after the lease = %v, want the task at attempt 2", ids(second))
	}
	errs, err := a.TaskFinish(context.Background(), []store.Finish{finishOf(first, store.Succeeded, t0.Add(32*time.Second))})
	if err != nil || len(errs) != 1 {
		t.Fatalf("TaskFinish = %v, %v", errs, err)
	}
	wantErr(t, "the first store's late finish", errs[0], store.ErrLeaseLost)
	finish(t, b, second[0], store.Succeeded, t0.Add(33*time.Second))
	if got := get(t, a, tenant, tk.ID); got.Status != store.Succeeded || got.AttemptNumber != 2 {
		t.Errorf("task = %s attempt %d, want SUCCEEDED 2", got.Status, got.AttemptNumber)
	}
}
