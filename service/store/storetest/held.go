package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// heldOf is the Finish with which a scheduler hands claimed task c back
// unsent (store.Finish.Held), due again at next.
func heldOf(c *store.Task, now, next time.Time) store.Finish {
	return store.Finish{
		TaskID: c.ID, Version: c.Version, Status: store.Pending, Held: true, NextAttemptAt: next,
		PrevDelay: c.PrevDelay, LastError: "status 503 (held: target overloaded)", LastStatus: 503, Now: now,
	}
}

func testFinishHeld(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	t.Run("after a retry", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		finish(t, s, claimOne(t, s, t0, tk.ID), store.Pending, t0)
		c := claimOne(t, s, t0.Add(time.Second), tk.ID)
		if c.AttemptNumber != 2 {
			t.Fatalf("second claim is attempt %d, want 2", c.AttemptNumber)
		}
		now, next := t0.Add(time.Second+10*time.Millisecond), t0.Add(5*time.Second)
		f := heldOf(c, now, next)
		if errs, err := s.TaskFinish(ctx, []store.Finish{f}); err != nil || errs[0] != nil {
			t.Fatalf("TaskFinish(held) = %v, %v", errs, err)
		}
		got := get(t, s, tenant, tk.ID)
		if got.Status != store.Pending || got.AttemptNumber != 1 || got.Version != c.Version+1 ||
			!sameTime(got.NextAttemptAt, next) || got.LastError != f.LastError || got.LastStatus != 503 ||
			!got.LeaseUntil.IsZero() || !got.FinishedAt.IsZero() || !sameTime(got.UpdatedAt, now) {
			t.Errorf("held task = %s attempt %d v%d next %v last %q/%d lease %v finished %v updated %v; "+
				"want PENDING attempt 1 v%d next %v last %q/503, no lease, not finished, updated %v",
				got.Status, got.AttemptNumber, got.Version, got.NextAttemptAt, got.LastError, got.LastStatus,
				got.LeaseUntil, got.FinishedAt, got.UpdatedAt, c.Version+1, next, f.LastError, now)
		}
		if log := attempts(t, s, tenant, tk.ID); len(log) != 1 || log[0].AttemptNumber != 1 {
			t.Errorf("attempt log = %+v, want attempt 1 only", log)
		}
		if early := claim(t, s, next.Add(-time.Millisecond), 10); len(early) != 0 {
			t.Errorf("claimed %v before the held task was due", ids(early))
		}
		if again := claimOne(t, s, next, tk.ID); again.AttemptNumber != 2 {
			t.Errorf("claim after the hold is attempt %d, want 2 again", again.AttemptNumber)
		}
		counts, err := s.TaskCounts(ctx)
		if err != nil || counts[store.InFlight] != 1 || counts[store.Pending] != 0 {
			t.Errorf("TaskCounts = %v, %v; want 1 IN_FLIGHT, 0 PENDING", counts, err)
		}
	})
	t.Run("first attempt", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		c := claimOne(t, s, t0, tk.ID)
		if errs, err := s.TaskFinish(ctx, []store.Finish{heldOf(c, t0, t0.Add(time.Second))}); err != nil || errs[0] != nil {
			t.Fatalf("TaskFinish(held) = %v, %v", errs, err)
		}
		if got := get(t, s, tenant, tk.ID); got.Status != store.Pending || got.AttemptNumber != 0 {
			t.Errorf("held task = %s attempt %d, want PENDING attempt 0", got.Status, got.AttemptNumber)
		}
		counts, err := s.TaskCounts(ctx)
		if err != nil || counts[store.Pending] != 1 || counts[store.InFlight] != 0 {
			t.Errorf("TaskCounts = %v, %v; want 1 PENDING", counts, err)
		}
	})
	t.Run("after a lost lease", func(t *testing.T) {
		// The lost attempt stays charged; only the claim's own is taken back.
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		c := claimOne(t, s, t0, tk.ID)
		c = claimOne(t, s, c.LeaseUntil, tk.ID)
		now := c.LeaseUntil.Add(-time.Second)
		if errs, err := s.TaskFinish(ctx, []store.Finish{heldOf(c, now, now.Add(time.Second))}); err != nil || errs[0] != nil {
			t.Fatalf("TaskFinish(held) = %v, %v", errs, err)
		}
		if got := get(t, s, tenant, tk.ID); got.AttemptNumber != 1 {
			t.Errorf("held task's attempt = %d, want 1 (the lost one)", got.AttemptNumber)
		}
		if log := attempts(t, s, tenant, tk.ID); len(log) != 1 || log[0].ErrorMessage != store.LeaseExpiredMessage {
			t.Errorf("attempt log = %+v, want the lost attempt only", log)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		c := claimOne(t, s, t0, tk.ID)
		done := heldOf(c, t0, t0)
		done.Status = store.Succeeded
		logged := heldOf(c, t0, t0)
		logged.Attempt = finishOf(c, store.Pending, t0).Attempt
		stale := heldOf(c, t0, t0)
		stale.Version--
		errs, err := s.TaskFinish(ctx, []store.Finish{done, logged, stale})
		if err != nil || len(errs) != 3 {
			t.Fatalf("TaskFinish = %v, %v", errs, err)
		}
		wantErr(t, "held as SUCCEEDED", errs[0], store.ErrInvalid)
		wantErr(t, "held with an attempt", errs[1], store.ErrInvalid)
		wantErr(t, "held at a stale version", errs[2], store.ErrLeaseLost)
		if got := get(t, s, tenant, tk.ID); got.Status != store.InFlight || got.AttemptNumber != 1 || got.Version != c.Version {
			t.Errorf("task after refused holds = %s attempt %d v%d; want IN_FLIGHT attempt 1 v%d", got.Status,
				got.AttemptNumber, got.Version, c.Version)
		}
	})
}
