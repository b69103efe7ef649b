package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

func testTaskCreateBatch(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	t.Run("each item as TaskCreate would answer it", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		old := create(t, s, newTask(tenant, "old"))
		conflict := newTask(tenant, "old")
		conflict.RequestHash = "another"
		repeatInBatch := newTask(tenant, "new-1")
		repeatInBatch.ID = "" // the first new-1's ID wins
		clashInBatch := newTask(tenant, "new-1")
		clashInBatch.RequestHash = "another"
		takenID := newTask(tenant, "taken-id")
		takenID.ID = old.ID
		noTenant := newTask("", "no-tenant")
		later := newTask("tenant-b", "new-2")
		later.NextAttemptAt = t0.Add(time.Hour)
		first := newTask(tenant, "new-1")
		first.ID = store.NewID()
		in := []*store.Task{newTask(tenant, "old"), conflict, first, repeatInBatch, clashInBatch, takenID, noTenant, later}
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil || len(res) != len(in) {
			t.Fatalf("TaskCreateBatch = %d results, %v; want %d", len(res), err, len(in))
		}
		type want struct {
			created bool
			id      string
			err     error
		}
		wants := []want{{false, old.ID, nil}, {false, "", store.ErrConflict}, {true, first.ID, nil},
			{false, first.ID, nil}, {false, "", store.ErrConflict}, {false, "", store.ErrConflict},
			{false, "", store.ErrInvalid}, {true, "", nil}}
		for i, w := range wants {
			r := res[i]
			if w.err != nil {
				wantErr(t, fmt.Sprintf("item %d (%s)", i, in[i].IdempotencyKey), r.Err, w.err)
				continue
			}
			if r.Err != nil || r.Created != w.created || r.Task == nil || (w.id != "" && r.Task.ID != w.id) {
				t.Fatalf("item %d (%s) = %+v, want created %v ID %q", i, in[i].IdempotencyKey, r, w.created, w.id)
			}
			checkRequest(t, r.Task, in[i])
			if got := get(t, s, in[i].Tenant, r.Task.ID); got.Status != store.Pending || got.Version != 1 {
				t.Errorf("item %d stored as %s v%d, want PENDING v1", i, got.Status, got.Version)
			}
		}
		if r := res[7].Task; !sameTime(r.NextAttemptAt, t0.Add(time.Hour)) || r.Tenant != "tenant-b" {
			t.Errorf("item 7 = tenant %s due %v, want tenant-b due %v", r.Tenant, r.NextAttemptAt, t0.Add(time.Hour))
		}
		counts, err := s.TaskCounts(ctx)
		if err != nil || counts[store.Pending] != 3 {
			t.Errorf("TaskCounts = %v, %v; want 3 PENDING", counts, err)
		}
		if due := due(t, s); len(due) != 3 {
			t.Errorf("TaskDue reports %d tasks, want 3", len(due))
		}
	})
	// Items that repeat no ID or key of the batch (the usual batch, which a
	// store may insert in bulk) but meet tasks stored before it.
	t.Run("distinct items meeting stored tasks", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		old1, old2 := create(t, s, newTask(tenant, "old-1")), create(t, s, newTask(tenant, "old-2"))
		conflict := newTask(tenant, "old-2")
		conflict.RequestHash = "another"
		takenID := newTask(tenant, "taken-id")
		takenID.ID = old1.ID
		in := []*store.Task{newTask(tenant, "new-1"), newTask(tenant, "old-1"), conflict, takenID, newTask(tenant, "new-2")}
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil || len(res) != len(in) {
			t.Fatalf("TaskCreateBatch = %d results, %v; want %d", len(res), err, len(in))
		}
		for _, i := range []int{0, 4} {
			if r := res[i]; r.Err != nil || !r.Created || r.Task == nil {
				t.Fatalf("item %d (%s) = %+v, want created", i, in[i].IdempotencyKey, r)
			}
			checkRequest(t, get(t, s, tenant, res[i].Task.ID), in[i])
		}
		if r := res[1]; r.Err != nil || r.Created || r.Task == nil || r.Task.ID != old1.ID {
			t.Errorf("item 1 (a repeat of old-1) = %+v, want old-1's task %s", r, old1.ID)
		} else {
			checkRequest(t, r.Task, in[1])
		}
		wantErr(t, "item 2 (old-2's key, another request)", res[2].Err, store.ErrConflict)
		wantErr(t, "item 3 (old-1's ID)", res[3].Err, store.ErrConflict)
		if got := get(t, s, tenant, old2.ID); got.RequestHash != old2.RequestHash {
			t.Errorf("old-2 has request hash %q after the conflict, want %q", got.RequestHash, old2.RequestHash)
		}
		counts, err := s.TaskCounts(ctx)
		if err != nil || counts[store.Pending] != 4 {
			t.Errorf("TaskCounts = %v, %v; want 4 PENDING", counts, err)
		}
		if due := due(t, s); len(due) != 4 {
			t.Errorf("TaskDue reports %d tasks, want 4", len(due))
		}
	})
	t.Run("a thousand tasks", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := make([]*store.Task, 1000)
		for i := range in {
			in[i] = newTask(tenant, fmt.Sprintf("k%d", i))
		}
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || !r.Created {
				t.Fatalf("item %d = %+v, want created", i, r)
			}
		}
		if got := claim(t, s, t0, store.MaxClaimLimit); len(got) != len(in) {
			t.Fatalf("claimed %d of the batch's %d tasks", len(got), len(in))
		}
	})
	t.Run("concurrent batches and creates sharing keys make one task per key", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		const keys, callers = 40, 6
		ids := make([][]string, callers)
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				ids[c] = make([]string, keys)
				if c%2 == 0 { // single creates
					for k := range keys {
						got, _, err := s.TaskCreate(ctx, newTask(tenant, fmt.Sprintf("k%d", k)))
						if err != nil {
							t.Errorf("TaskCreate = %v", err)
							return
						}
						ids[c][k] = got.ID
					}
					return
				}
				in := make([]*store.Task, keys)
				for k := range in {
					in[k] = newTask(tenant, fmt.Sprintf("k%d", (k+c)%keys))
				}
				res, err := s.TaskCreateBatch(ctx, in)
				if err != nil {
					t.Errorf("TaskCreateBatch = %v", err)
					return
				}
				for k, r := range res {
					if r.Err != nil {
						t.Errorf("item %d = %v", k, r.Err)
						return
					}
					ids[c][(k+c)%keys] = r.Task.ID
				}
			})
		}
		wg.Wait()
		for c := range callers {
			for k := range keys {
				if ids[c][k] != ids[0][k] {
					t.Fatalf("key k%d: caller %d has task %s, caller 0 %s", k, c, ids[c][k], ids[0][k])
				}
			}
		}
		if n := len(due(t, s)); n != keys {
			t.Errorf("%d live tasks, want %d", n, keys)
		}
	})
}

// testClaimLater checks ClaimParams.Later: what a claim among IDs did not
// take but the store still holds live is reported with when it is due.
func testClaimLater(t *testing.T, newStore NewStore) {
	s := setup(t, newStore)
	now := dueAt(t, s, "now", 0)
	future := dueAt(t, s, "future", time.Minute)
	leased := claimOne(t, s, t0, dueAt(t, s, "leased", 0).ID)
	done := claimOne(t, s, t0, dueAt(t, s, "done", 0).ID)
	finish(t, s, done, store.Succeeded, t0)
	retry := claimOne(t, s, t0, dueAt(t, s, "retry", 0).ID)
	finish(t, s, retry, store.Pending, t0) // due t0+1s
	var later []store.Due
	got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: t0, Lease: 30 * time.Second,
		IDs:   []string{now.ID, future.ID, leased.ID, done.ID, retry.ID, "no-such-task", future.ID},
		Later: func(d store.Due) { later = append(later, d) }})
	if err != nil || len(got) != 1 || got[0].ID != now.ID {
		t.Fatalf("TaskClaim = %v, %v; want %s", ids(got), err, now.ID)
	}
	want := map[string]store.Due{
		future.ID: {ID: future.ID, At: t0.Add(time.Minute), Version: 1},
		leased.ID: {ID: leased.ID, At: leased.LeaseUntil, Version: leased.Version},
		retry.ID:  {ID: retry.ID, At: t0.Add(time.Second), Version: retry.Version + 1},
	}
	seen := map[string]bool{}
	for _, d := range later {
		w, ok := want[d.ID]
		if !ok || seen[d.ID] || !sameTime(d.At, w.At) || d.Version != w.Version {
			t.Errorf("Later(%v): want each of %v once", d, want)
		}
		seen[d.ID] = true
	}
	if len(seen) != len(want) {
		t.Errorf("Later reported %v, want %v", later, want)
	}
}
