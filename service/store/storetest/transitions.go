package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

func cancel(s store.Store, tn, id string, now time.Time) (*store.Task, error) {
	return s.TaskTransition(context.Background(), store.Transition{Tenant: tn, TaskID: id,
		From: []store.Status{store.Pending}, To: store.Cancelled, Now: now})
}

func redrive(s store.Store, tn, id string, now time.Time) (*store.Task, error) {
	return s.TaskTransition(context.Background(), store.Transition{Tenant: tn, TaskID: id,
		From: []store.Status{store.Exhausted, store.Failed}, To: store.Pending, Now: now})
}

func testCancel(t *testing.T, newStore NewStore) {
	t.Run("pending task", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		now := t0.Add(time.Minute)
		got, err := cancel(s, tenant, tk.ID, now)
		if err != nil {
			t.Fatalf("cancel = %v", err)
		}
		for _, c := range []*store.Task{got, get(t, s, tenant, tk.ID)} {
			if c.Status != store.Cancelled || !sameTime(c.FinishedAt, now) || c.Version <= tk.Version ||
				!sameTime(c.UpdatedAt, now) {
				t.Errorf("cancelled task = %s finished %v updated %v version %d; want CANCELLED at %v, version > %d",
					c.Status, c.FinishedAt, c.UpdatedAt, c.Version, now, tk.Version)
			}
		}
		if c := claim(t, s, now.Add(time.Hour), 10); len(c) != 0 {
			t.Errorf("claimed a cancelled task: %v", ids(c))
		}
		_, err = cancel(s, tenant, tk.ID, now)
		wantErr(t, "cancel again", err, store.ErrConflict)
	})
	t.Run("in flight or terminal", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		flying := create(t, s, newTask(tenant, "k1"))
		done := create(t, s, newTask(tenant, "k2"))
		claimOne(t, s, t0, flying.ID)
		finish(t, s, claimOne(t, s, t0, done.ID), store.Succeeded, t0)
		for _, id := range []string{flying.ID, done.ID} {
			before := get(t, s, tenant, id)
			_, err := cancel(s, tenant, id, t0)
			wantErr(t, "cancel "+string(before.Status), err, store.ErrConflict)
			if after := get(t, s, tenant, id); after.Status != before.Status || after.Version != before.Version {
				t.Errorf("refused cancel changed the task: %s v%d → %s v%d", before.Status, before.Version,
					after.Status, after.Version)
			}
		}
	})
	t.Run("unknown transition", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		_, err := s.TaskTransition(context.Background(), store.Transition{Tenant: tenant, TaskID: tk.ID,
			From: []store.Status{store.Pending}, To: store.Succeeded, Now: t0})
		wantErr(t, "transition to SUCCEEDED", err, store.ErrInvalid)
	})
}

func testRedrive(t *testing.T, newStore NewStore) {
	for _, dead := range []store.Status{store.Exhausted, store.Failed} {
		t.Run(string(dead), func(t *testing.T) {
			t.Parallel()
			s := setup(t, newStore)
			tk := create(t, s, newTask(tenant, "k1"))
			c := claimOne(t, s, t0, tk.ID)
			finish(t, s, c, store.Pending, t0)
			c = claimOne(t, s, t0.Add(2*time.Second), tk.ID)
			finish(t, s, c, dead, t0.Add(3*time.Second))

			now := t0.Add(time.Hour)
			got, err := redrive(s, tenant, tk.ID, now)
			if err != nil {
				t.Fatalf("redrive = %v", err)
			}
			for _, r := range []*store.Task{got, get(t, s, tenant, tk.ID)} {
				if r.Status != store.Pending || r.AttemptNumber != 0 || r.ID != tk.ID ||
					r.IdempotencyKey != tk.IdempotencyKey || r.LastError != "" || r.LastStatus != 0 || r.PrevDelay != 0 {
					t.Errorf("redriven = %s attempt %d id %s key %s lastError %q/%d prevDelay %v; want a fresh PENDING task, same id and key",
						r.Status, r.AttemptNumber, r.ID, r.IdempotencyKey, r.LastError, r.LastStatus, r.PrevDelay)
				}
				if !sameTime(r.NextAttemptAt, now) || !sameTime(r.BudgetStart, now) || !r.FinishedAt.IsZero() ||
					r.Version <= c.Version {
					t.Errorf("redriven times next %v budget %v finished %v version %d; want %v %v zero >%d",
						r.NextAttemptAt, r.BudgetStart, r.FinishedAt, r.Version, now, now, c.Version)
				}
			}
			again := claimOne(t, s, now, tk.ID)
			if again.AttemptNumber != 1 {
				t.Errorf("first attempt after redrive is number %d, want 1", again.AttemptNumber)
			}
			finish(t, s, again, store.Succeeded, now)
			log := attempts(t, s, tenant, tk.ID)
			if got, want := attemptNumbers(log), []int{1, 2, 1}; !equalInts(got, want) {
				t.Errorf("attempt log numbers = %v, want %v (old attempts kept)", got, want)
			}
		})
	}
	t.Run("only dead letters", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		pending := create(t, s, newTask(tenant, "k1"))
		done := create(t, s, newTask(tenant, "k2"))
		finish(t, s, claimOne(t, s, t0, done.ID), store.Succeeded, t0)
		for _, id := range []string{pending.ID, done.ID} {
			_, err := redrive(s, tenant, id, t0)
			wantErr(t, "redrive", err, store.ErrConflict)
		}
	})
}
