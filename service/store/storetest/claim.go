package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// dueAt creates a task of tenant due at t0+offset.
func dueAt(t *testing.T, s store.Store, key string, offset time.Duration) *store.Task {
	t.Helper()
	in := newTask(tenant, key)
	in.NextAttemptAt = t0.Add(offset)
	return create(t, s, in)
}

func testClaim(t *testing.T, newStore NewStore) {
	t.Run("only due tasks, earliest first", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		late := dueAt(t, s, "late", 0)
		future := dueAt(t, s, "future", time.Millisecond)
		early := dueAt(t, s, "early", -time.Minute)
		got := claim(t, s, t0, 10)
		sameList(t, "claimed", ids(got), ids([]*store.Task{early, late}))
		if again := claim(t, s, t0.Add(10*time.Second), 10); len(again) != 1 || again[0].ID != future.ID {
			t.Errorf("second claim = %v, want only %s (the others are leased)", ids(again), future.ID)
		}
	})
	t.Run("claimed state", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := newTask(tenant, "k1")
		in.Body, in.BodyBinary = []byte{0, 1, 2, 0xff}, true
		in.NextAttemptAt = t0.Add(-1500 * time.Millisecond)
		tk := create(t, s, in)
		now := t0.Add(time.Second)
		got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: now, Lease: 45 * time.Second, Limit: 5})
		if err != nil || len(got) != 1 {
			t.Fatalf("TaskClaim = %v, %v; want one task", ids(got), err)
		}
		c := got[0]
		checkRequest(t, c, in)
		if c.Status != store.InFlight || c.AttemptNumber != 1 || c.Version <= tk.Version ||
			!sameTime(c.LeaseUntil, now.Add(45*time.Second)) || !sameTime(c.NextAttemptAt, in.NextAttemptAt) {
			t.Errorf("claimed = %s attempt %d version %d lease %v next %v; want IN_FLIGHT 1 >%d %v %v", c.Status,
				c.AttemptNumber, c.Version, c.LeaseUntil, c.NextAttemptAt, tk.Version, now.Add(45*time.Second), in.NextAttemptAt)
		}
		stored := get(t, s, tenant, tk.ID)
		if stored.Status != store.InFlight || stored.Version != c.Version || !stored.LeaseUntil.Equal(c.LeaseUntil) {
			t.Errorf("stored after claim = %s v%d lease %v, want what TaskClaim returned", stored.Status,
				stored.Version, stored.LeaseUntil)
		}
	})
	t.Run("omit request", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		byID, all := dueAt(t, s, "named", 0), dueAt(t, s, "any", 0)
		for _, tc := range []struct {
			name string
			want *store.Task
			ids  []string
		}{{"among IDs", byID, []string{byID.ID}}, {"any due", all, nil}} {
			got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: t0, Lease: time.Minute, Limit: 1,
				IDs: tc.ids, OmitRequest: true})
			if err != nil || len(got) != 1 || got[0].ID != tc.want.ID {
				t.Fatalf("%s: TaskClaim(OmitRequest) = %v, %v; want %s", tc.name, ids(got), err, tc.want.ID)
			}
			c := got[0]
			if c.Status != store.InFlight || c.AttemptNumber != 1 || c.Version <= tc.want.Version ||
				c.IdempotencyKey != tc.want.IdempotencyKey || c.PolicyID != tc.want.PolicyID || c.Tenant != tenant ||
				!sameTime(c.LeaseUntil, t0.Add(time.Minute)) || !sameTime(c.CreatedAt, tc.want.CreatedAt) {
				t.Errorf("%s: claimed = %s attempt %d version %d key %q policy %q lease %v; want as without OmitRequest",
					tc.name, c.Status, c.AttemptNumber, c.Version, c.IdempotencyKey, c.PolicyID, c.LeaseUntil)
			}
			if c.TargetURL != "" { // a Store may fill the request in anyway
				checkRequest(t, c, tc.want)
			}
		}
	})
	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		var tasks []*store.Task
		for i := range 5 {
			tasks = append(tasks, dueAt(t, s, fmt.Sprint("k", i), time.Duration(-i)*time.Second))
		}
		sameList(t, "Limit 2", ids(claim(t, s, t0, 2)), ids([]*store.Task{tasks[4], tasks[3]}))
		sameList(t, "Limit 0", ids(claim(t, s, t0, 0)), ids([]*store.Task{tasks[2]}))
	})
	t.Run("among IDs", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		a, b, c := dueAt(t, s, "a", 0), dueAt(t, s, "b", -time.Second), dueAt(t, s, "c", 0)
		notDue := dueAt(t, s, "d", time.Hour)
		other := create(t, s, newTask("tenant-b", "e"))
		got := claim(t, s, t0, 0, a.ID, b.ID, notDue.ID, store.NewID())
		sameList(t, "claimed among IDs", ids(got), ids([]*store.Task{b, a}))
		got = claim(t, s, t0, 1, c.ID, other.ID)
		if len(got) != 1 {
			t.Errorf("Limit 1 among 2 due IDs claimed %v", ids(got))
		}
	})
}

func testClaimConcurrent(t *testing.T, newStore NewStore) {
	s := setup(t, newStore)
	const n, claimers = 120, 6
	created := make(map[string]bool, n)
	for _, tk := range createN(t, s, tenant, "k", n) {
		created[tk.ID] = true
	}
	var mu sync.Mutex
	claimedBy := map[string]int{}
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Go(func() {
			for {
				got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: t0, Lease: time.Minute, Limit: 7})
				if err != nil {
					t.Errorf("TaskClaim = %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, dup := claimedBy[tk.ID]; dup {
						t.Errorf("task %s claimed by claimer %d and %d", tk.ID, prev, w)
					}
					claimedBy[tk.ID] = w
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimedBy) != n {
		t.Errorf("claimed %d tasks, want %d", len(claimedBy), n)
	}
	for id := range claimedBy {
		if !created[id] {
			t.Errorf("claimed unknown task %s", id)
		}
	}
}

func testClaimExpiredLease(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	tk := create(t, s, newTask(tenant, "k1"))
	first, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: 30 * time.Second, Limit: 1})
	if err != nil || len(first) != 1 {
		t.Fatalf("TaskClaim = %v, %v", ids(first), err)
	}
	if got := claim(t, s, t0.Add(29*time.Second), 10); len(got) != 0 {
		t.Fatalf("claimed %v while the lease holds", ids(got))
	}
	now := t0.Add(30 * time.Second)
	second := claim(t, s, now, 10)
	if len(second) != 1 || second[0].ID != tk.ID {
		t.Fatalf("claim after the lease = %v, want %s", ids(second), tk.ID)
	}
	re := second[0]
	if re.AttemptNumber != 2 || re.Version <= first[0].Version || re.Status != store.InFlight ||
		!sameTime(re.LeaseUntil, now.Add(30*time.Second)) || re.LastError != store.LeaseExpiredMessage {
		t.Errorf("reclaimed = attempt %d version %d %s lease %v lastError %q; want 2, >%d, IN_FLIGHT, %v, %q",
			re.AttemptNumber, re.Version, re.Status, re.LeaseUntil, re.LastError, first[0].Version,
			now.Add(30*time.Second), store.LeaseExpiredMessage)
	}
	log := attempts(t, s, tenant, tk.ID)
	if len(log) != 1 || log[0].AttemptNumber != 1 || log[0].ErrorMessage != store.LeaseExpiredMessage ||
		log[0].ResponseStatus != 0 || log[0].TaskID != tk.ID {
		t.Fatalf("attempt log = %+v, want attempt 1 lost to the expired lease", log)
	}
	errs, err := s.TaskFinish(ctx, []store.Finish{finishOf(first[0], store.Succeeded, now)})
	if err != nil || len(errs) != 1 {
		t.Fatalf("TaskFinish(stale) = %v, %v", errs, err)
	}
	wantErr(t, "TaskFinish by the first worker", errs[0], store.ErrLeaseLost)
	finish(t, s, re, store.Succeeded, now.Add(time.Second))
	if got := attemptNumbers(attempts(t, s, tenant, tk.ID)); !equalInts(got, []int{1, 2}) {
		t.Errorf("attempt log numbers = %v, want [1 2]", got)
	}
}
