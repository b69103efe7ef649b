package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// testCreateClaimed pins a task created with LeaseUntil set: claimed as
// TaskClaim at its creation would have left it, field for field, beside a
// twin created PENDING and claimed so; or, by a store that does not create
// claimed tasks, PENDING as without. Either way the store's answer says
// which, and the task is leased, reclaimed and finished like any other.
func testCreateClaimed(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	const lease = 40 * time.Second
	t.Run("as a claim at creation", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := newTask(tenant, "claimed")
		in.CreatedAt, in.NextAttemptAt, in.LeaseUntil = t0, t0, t0.Add(lease)
		got, created, err := s.TaskCreate(ctx, in)
		if err != nil || !created {
			t.Fatalf("TaskCreate = %v, %v, %v", got, created, err)
		}
		if got.Status == store.Pending {
			plain := newTask(tenant, "plain")
			plain.CreatedAt, plain.NextAttemptAt = t0, t0
			want := create(t, s, plain)
			if got.Version != want.Version || got.AttemptNumber != 0 || !got.LeaseUntil.IsZero() {
				t.Fatalf("created PENDING = v%d attempt %d lease %v; want as without LeaseUntil", got.Version,
					got.AttemptNumber, got.LeaseUntil)
			}
			if c := claim(t, s, t0, 10); len(c) != 2 {
				t.Fatalf("claimed %v; want both tasks: created PENDING, it is due", ids(c))
			}
			return
		}
		twin := newTask(tenant, "twin")
		twin.CreatedAt, twin.NextAttemptAt = t0, t0
		create(t, s, twin)
		claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: lease, Limit: 1})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("TaskClaim of the twin = %v, %v", ids(claimed), err)
		}
		want := claimed[0]
		for name, task := range map[string]*store.Task{"answered": got, "stored": get(t, s, tenant, got.ID)} {
			if task.Status != want.Status || task.AttemptNumber != want.AttemptNumber || task.Version != want.Version ||
				!task.LeaseUntil.Equal(want.LeaseUntil) || !task.NextAttemptAt.Equal(want.NextAttemptAt) ||
				!task.BudgetStart.Equal(want.BudgetStart) || !task.UpdatedAt.Equal(want.UpdatedAt) {
				t.Errorf("%s = %s attempt %d v%d lease %v next %v budget %v updated %v; want the claimed twin's "+
					"%s attempt %d v%d lease %v next %v budget %v updated %v", name, task.Status, task.AttemptNumber,
					task.Version, task.LeaseUntil, task.NextAttemptAt, task.BudgetStart, task.UpdatedAt, want.Status,
					want.AttemptNumber, want.Version, want.LeaseUntil, want.NextAttemptAt, want.BudgetStart, want.UpdatedAt)
			}
			checkRequest(t, task, in)
		}
		if got.Holder != want.Holder {
			t.Errorf("holder = %q, want the twin's %q", got.Holder, want.Holder)
		}
		counts, err := s.TaskCounts(ctx)
		if err != nil || counts[store.InFlight] != 2 || counts[store.Pending] != 0 {
			t.Errorf("TaskCounts = %v, %v; want 2 IN_FLIGHT", counts, err)
		}
		if again, created, err := s.TaskCreate(ctx, in); err != nil || created || again.ID != got.ID ||
			again.Status != store.InFlight {
			t.Errorf("repeat = %v created %v, %v; want the claimed task, not created", again, created, err)
		}
		if c := claim(t, s, t0.Add(lease-time.Millisecond), 10); len(c) != 0 {
			t.Fatalf("claimed %v while the leases hold", ids(c))
		}
		re := claim(t, s, t0.Add(lease), 10)
		if len(re) != 2 {
			t.Fatalf("claim once the leases end = %v, want both", ids(re))
		}
		for _, r := range re {
			if r.ID == got.ID && (r.AttemptNumber != 2 || r.LastError != store.LeaseExpiredMessage) {
				t.Errorf("reclaimed = attempt %d lastError %q; want 2, %q", r.AttemptNumber, r.LastError,
					store.LeaseExpiredMessage)
			}
		}
		if log := attempts(t, s, tenant, got.ID); len(log) != 1 || log[0].AttemptNumber != 1 {
			t.Errorf("attempt log = %+v, want attempt 1 lost to the expired lease", log)
		}
	})
	t.Run("finished under its lease", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := newTask(tenant, "k")
		in.CreatedAt, in.NextAttemptAt, in.LeaseUntil = t0, t0, t0.Add(lease)
		got := create(t, s, in)
		if got.Status == store.Pending {
			t.Skip("this store creates tasks PENDING whatever LeaseUntil says")
		}
		finish(t, s, got, store.Succeeded, t0.Add(time.Second))
		if done := get(t, s, tenant, got.ID); done.Status != store.Succeeded {
			t.Errorf("after finishing = %s, want SUCCEEDED", done.Status)
		}
	})
	t.Run("not when due later", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := newTask(tenant, "later")
		in.CreatedAt, in.NextAttemptAt, in.LeaseUntil = t0, t0.Add(time.Second), t0.Add(lease)
		if got := create(t, s, in); got.Status != store.Pending || got.Version != 1 {
			t.Errorf("created = %s v%d; want PENDING v1: a task due later is not claimed at creation", got.Status,
				got.Version)
		}
	})
	t.Run("in a batch", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		a, b, c := newTask(tenant, "a"), newTask(tenant, "b"), newTask(tenant, "a")
		for _, x := range []*store.Task{a, b, c} {
			x.CreatedAt, x.NextAttemptAt = t0, t0
		}
		a.LeaseUntil = t0.Add(lease)
		c.LeaseUntil = a.LeaseUntil
		res, err := s.TaskCreateBatch(ctx, []*store.Task{a, b, c})
		if err != nil || len(res) != 3 || res[0].Err != nil || res[1].Err != nil || res[2].Err != nil {
			t.Fatalf("TaskCreateBatch = %+v, %v", res, err)
		}
		if res[1].Task.Status != store.Pending {
			t.Errorf("b (no LeaseUntil) = %s, want PENDING", res[1].Task.Status)
		}
		if res[2].Created || res[2].Task.ID != res[0].Task.ID || res[2].Task.Status != res[0].Task.Status ||
			res[2].Task.Version != res[0].Task.Version {
			t.Errorf("a's repeat = created %v, %s v%d; want a as stored, %s v%d", res[2].Created, res[2].Task.Status,
				res[2].Task.Version, res[0].Task.Status, res[0].Task.Version)
		}
		if stored := get(t, s, tenant, res[0].Task.ID); stored.Status != res[0].Task.Status ||
			stored.Version != res[0].Task.Version {
			t.Errorf("a stored = %s v%d, answered %s v%d", stored.Status, stored.Version, res[0].Task.Status,
				res[0].Task.Version)
		}
	})
}
