package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

func testFinish(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	for _, status := range []store.Status{store.Succeeded, store.Exhausted, store.Failed} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			s := setup(t, newStore)
			tk := create(t, s, newTask(tenant, "k1"))
			c := claimOne(t, s, t0, tk.ID)
			now := t0.Add(1234 * time.Millisecond)
			f := finishOf(c, status, now)
			errs, err := s.TaskFinish(ctx, []store.Finish{f})
			if err != nil || len(errs) != 1 || errs[0] != nil {
				t.Fatalf("TaskFinish = %v, %v", errs, err)
			}
			got := get(t, s, tenant, tk.ID)
			if got.Status != status || got.Version != c.Version+1 || !got.LeaseUntil.IsZero() ||
				!sameTime(got.FinishedAt, now) || !sameTime(got.UpdatedAt, now) || got.AttemptNumber != 1 ||
				got.LastError != f.LastError || got.LastStatus != f.LastStatus {
				t.Errorf("finished = %s v%d lease %v finished %v updated %v attempt %d last %q/%d; want %s v>%d no lease at %v, 1, %q/%d",
					got.Status, got.Version, got.LeaseUntil, got.FinishedAt, got.UpdatedAt, got.AttemptNumber,
					got.LastError, got.LastStatus, status, c.Version, now, f.LastError, f.LastStatus)
			}
			log := attempts(t, s, tenant, tk.ID)
			if len(log) != 1 {
				t.Fatalf("attempt log has %d entries, want 1", len(log))
			}
			a, w := log[0], f.Attempt
			if a.TaskID != tk.ID || a.AttemptNumber != w.AttemptNumber || !sameTime(a.StartedAt, w.StartedAt) ||
				a.Duration.Truncate(time.Millisecond) != w.Duration || a.ResponseStatus != w.ResponseStatus ||
				a.ErrorMessage != w.ErrorMessage || a.ResponseBody != w.ResponseBody {
				t.Errorf("attempt = %+v, want %+v", a, w)
			}
			if c := claim(t, s, now.Add(time.Hour), 10); len(c) != 0 {
				t.Errorf("claimed a %s task: %v", status, ids(c))
			}
		})
	}
	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		c := claimOne(t, s, t0, tk.ID)
		f := finishOf(c, store.Pending, t0)
		f.NextAttemptAt, f.PrevDelay = t0.Add(5*time.Second), 3700*time.Millisecond
		if errs, err := s.TaskFinish(ctx, []store.Finish{f}); err != nil || errs[0] != nil {
			t.Fatalf("TaskFinish = %v, %v", errs, err)
		}
		got := get(t, s, tenant, tk.ID)
		if got.Status != store.Pending || !sameTime(got.NextAttemptAt, f.NextAttemptAt) ||
			got.PrevDelay.Truncate(time.Millisecond) != f.PrevDelay || !got.FinishedAt.IsZero() || !got.LeaseUntil.IsZero() {
			t.Errorf("retrying task = %s next %v prevDelay %v finished %v lease %v; want PENDING %v %v zero zero",
				got.Status, got.NextAttemptAt, got.PrevDelay, got.FinishedAt, got.LeaseUntil, f.NextAttemptAt, f.PrevDelay)
		}
		if early := claim(t, s, t0.Add(4999*time.Millisecond), 10); len(early) != 0 {
			t.Errorf("claimed %v before its next attempt", ids(early))
		}
		if next := claimOne(t, s, t0.Add(5*time.Second), tk.ID); next.AttemptNumber != 2 {
			t.Errorf("next claim is attempt %d, want 2", next.AttemptNumber)
		}
	})
	t.Run("retry now", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		c := claimOne(t, s, t0, tk.ID)
		f := finishOf(c, store.Pending, t0.Add(time.Second))
		f.NextAttemptAt = time.Time{}
		if errs, err := s.TaskFinish(ctx, []store.Finish{f}); err != nil || errs[0] != nil {
			t.Fatalf("TaskFinish = %v, %v", errs, err)
		}
		if got := get(t, s, tenant, tk.ID); !sameTime(got.NextAttemptAt, f.Now) {
			t.Errorf("NextAttemptAt = %v, want Now %v", got.NextAttemptAt, f.Now)
		}
	})
	t.Run("no attempt logged", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		f := finishOf(claimOne(t, s, t0, tk.ID), store.Exhausted, t0)
		f.Attempt = store.Attempt{}
		if errs, err := s.TaskFinish(ctx, []store.Finish{f}); err != nil || errs[0] != nil {
			t.Fatalf("TaskFinish = %v, %v", errs, err)
		}
		if log := attempts(t, s, tenant, tk.ID); len(log) != 0 {
			t.Errorf("attempt log = %+v, want empty", log)
		}
	})
	t.Run("after the lease ran out, before a reclaim", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := create(t, s, newTask(tenant, "k1"))
		finish(t, s, claimOne(t, s, t0, tk.ID), store.Succeeded, t0.Add(time.Hour))
		if got := get(t, s, tenant, tk.ID); got.Status != store.Succeeded {
			t.Errorf("status = %s, want SUCCEEDED", got.Status)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		errs, err := s.TaskFinish(ctx, nil)
		if err != nil || len(errs) != 0 {
			t.Errorf("TaskFinish(nil) = %v, %v; want no errors", errs, err)
		}
	})
}

func testFinishFencing(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	ok := create(t, s, newTask(tenant, "ok"))
	stale := create(t, s, newTask(tenant, "stale"))
	bad := create(t, s, newTask(tenant, "bad"))
	never := create(t, s, newTask(tenant, "never"))
	dup := create(t, s, newTask(tenant, "dup"))
	cOK, cStale, cBad := claimOne(t, s, t0, ok.ID), claimOne(t, s, t0, stale.ID), claimOne(t, s, t0, bad.ID)
	cDup := claimOne(t, s, t0, dup.ID)

	fStale := finishOf(cStale, store.Succeeded, t0)
	fStale.Version--
	fBad := finishOf(cBad, store.Succeeded, t0)
	fBad.Status = store.Cancelled
	fNever := finishOf(never, store.Succeeded, t0)
	fMissing := finishOf(never, store.Succeeded, t0)
	fMissing.TaskID = store.NewID()
	before := map[string]*store.Task{}
	for _, tk := range []*store.Task{stale, bad, never} {
		before[tk.ID] = get(t, s, tenant, tk.ID)
	}

	errs, err := s.TaskFinish(ctx, []store.Finish{
		finishOf(cOK, store.Succeeded, t0), fStale, fBad, fNever, fMissing,
		finishOf(cDup, store.Pending, t0), finishOf(cDup, store.Succeeded, t0),
	})
	if err != nil || len(errs) != 7 {
		t.Fatalf("TaskFinish = %v, %v; want 7 results", errs, err)
	}
	for i, want := range []error{nil, store.ErrLeaseLost, store.ErrInvalid, store.ErrLeaseLost, store.ErrNotFound,
		nil, store.ErrLeaseLost} {
		wantErr(t, "item "+string(rune('0'+i)), errs[i], want)
	}
	if got := get(t, s, tenant, ok.ID); got.Status != store.Succeeded {
		t.Errorf("the good item's task is %s, want SUCCEEDED", got.Status)
	}
	if got := get(t, s, tenant, dup.ID); got.Status != store.Pending {
		t.Errorf("the twice-finished task is %s, want PENDING (the first finish)", got.Status)
	}
	for id, b := range before {
		got := get(t, s, tenant, id)
		if got.Status != b.Status || got.Version != b.Version || got.LastError != b.LastError {
			t.Errorf("refused item changed task %s: %s v%d → %s v%d", id, b.Status, b.Version, got.Status, got.Version)
		}
		if log := attempts(t, s, tenant, id); len(log) != 0 {
			t.Errorf("refused item logged attempts on %s: %+v", id, log)
		}
	}
}

func testFinishConcurrent(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	const n = 40
	createN(t, s, tenant, "k", n)
	claimed := claim(t, s, t0, n)
	if len(claimed) != n {
		t.Fatalf("claimed %d, want %d", len(claimed), n)
	}
	var wg sync.WaitGroup
	for i, c := range claimed {
		wg.Go(func() {
			status := store.Succeeded
			if i%2 == 1 {
				status = store.Pending
			}
			errs, err := s.TaskFinish(ctx, []store.Finish{finishOf(c, status, t0)})
			if err != nil || errs[0] != nil {
				t.Errorf("TaskFinish(%s) = %v, %v", c.ID, errs, err)
			}
		})
	}
	wg.Wait()
	counts, err := s.TaskCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.Succeeded] != n/2 || counts[store.Pending] != n/2 || counts[store.InFlight] != 0 {
		t.Errorf("counts = %v, want %d SUCCEEDED and %d PENDING", counts, n/2, n/2)
	}
	for _, c := range claimed {
		if log := attempts(t, s, tenant, c.ID); len(log) != 1 {
			t.Errorf("task %s logged %d attempts, want 1", c.ID, len(log))
		}
	}
}
