package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// attempts returns a task's whole attempt log, a page of 2 at a time.
func attempts(t *testing.T, s store.Store, tn, id string) []*store.Attempt {
	t.Helper()
	var out []*store.Attempt
	token := ""
	for {
		items, next, err := s.AttemptList(context.Background(), tn, id, store.Page{Token: token, Limit: 2})
		if err != nil {
			t.Fatalf("AttemptList(%s) = %v", id, err)
		}
		out = append(out, items...)
		if next == "" {
			return out
		}
		token = next
	}
}

func attemptNumbers(log []*store.Attempt) []int {
	out := make([]int, len(log))
	for i, a := range log {
		out[i] = a.AttemptNumber
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testAttemptList(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	tk := create(t, s, newTask(tenant, "k1"))
	quiet := create(t, s, newTask(tenant, "k2"))
	now := t0
	for range 6 {
		c := claimOne(t, s, now, tk.ID)
		finish(t, s, c, store.Pending, now)
		now = now.Add(2 * time.Second)
	}
	finish(t, s, claimOne(t, s, now, tk.ID), store.Succeeded, now)

	var pages [][]int
	token := ""
	for {
		items, next, err := s.AttemptList(ctx, tenant, tk.ID, store.Page{Token: token, Limit: 3})
		if err != nil {
			t.Fatalf("AttemptList = %v", err)
		}
		pages = append(pages, attemptNumbers(items))
		if next == "" {
			break
		}
		token = next
	}
	if len(pages) != 3 || !equalInts(pages[0], []int{1, 2, 3}) || !equalInts(pages[1], []int{4, 5, 6}) ||
		!equalInts(pages[2], []int{7}) {
		t.Errorf("pages = %v, want [[1 2 3] [4 5 6] [7]]", pages)
	}
	log := attempts(t, s, tenant, tk.ID)
	if last := log[len(log)-1]; last.ResponseStatus != 200 || !sameTime(last.StartedAt, now.Add(-250*time.Millisecond)) {
		t.Errorf("last attempt = %+v, want the success started at %v", last, now.Add(-250*time.Millisecond))
	}
	items, next, err := s.AttemptList(ctx, tenant, quiet.ID, store.Page{})
	if err != nil || len(items) != 0 || next != "" {
		t.Errorf("AttemptList(no attempts) = %d items, %q, %v; want none", len(items), next, err)
	}
	_, _, err = s.AttemptList(ctx, tenant, tk.ID, store.Page{Token: "bad"})
	wantErr(t, "AttemptList(bad token)", err, store.ErrInvalid)
	_, _, err = s.AttemptList(ctx, tenant, store.NewID(), store.Page{})
	wantErr(t, "AttemptList(unknown task)", err, store.ErrNotFound)
}

func testTaskCounts(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	check := func(when string, want map[store.Status]int64) {
		t.Helper()
		got, err := s.TaskCounts(ctx)
		if err != nil {
			t.Fatalf("TaskCounts = %v", err)
		}
		for _, st := range []store.Status{store.Pending, store.InFlight, store.Succeeded, store.Exhausted,
			store.Failed, store.Cancelled} {
			if n, ok := got[st]; !ok || n != want[st] {
				t.Errorf("%s: count of %s = %d (present %v), want %d", when, st, n, ok, want[st])
			}
		}
	}
	check("empty", nil)
	tasks := createN(t, s, tenant, "a", 5)
	create(t, s, newTask("tenant-b", "b"))
	check("created", map[store.Status]int64{store.Pending: 6})
	c := claim(t, s, t0, 4, tasks[0].ID, tasks[1].ID, tasks[2].ID, tasks[3].ID)
	finish(t, s, c[0], store.Succeeded, t0)
	finish(t, s, c[1], store.Failed, t0)
	finish(t, s, c[2], store.Exhausted, t0)
	if _, err := cancel(s, tenant, tasks[4].ID, t0); err != nil {
		t.Fatal(err)
	}
	check("moved", map[store.Status]int64{store.Pending: 1, store.InFlight: 1, store.Succeeded: 1,
		store.Failed: 1, store.Exhausted: 1, store.Cancelled: 1})
	if _, err := redrive(s, tenant, c[1].ID, t0); err != nil {
		t.Fatal(err)
	}
	check("redriven", map[store.Status]int64{store.Pending: 2, store.InFlight: 1, store.Succeeded: 1,
		store.Exhausted: 1, store.Cancelled: 1})
}

func testClose(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	tk := create(t, s, newTask(tenant, "k1"))
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	calls := map[string]error{}
	calls["Ping"] = s.Ping(ctx)
	_, _, calls["TaskCreate"] = s.TaskCreate(ctx, newTask(tenant, "k2"))
	_, calls["TaskGet"] = s.TaskGet(ctx, tenant, tk.ID)
	_, calls["TaskClaim"] = s.TaskClaim(ctx, store.ClaimParams{Now: t0, Limit: 1})
	_, calls["TaskFinish"] = s.TaskFinish(ctx, []store.Finish{finishOf(tk, store.Succeeded, t0)})
	_, _, calls["PolicyPut"] = s.PolicyPut(ctx, &store.Policy{Tenant: tenant, ID: "p", Spec: []byte("{}")})
	_, calls["TaskCounts"] = s.TaskCounts(ctx)
	_, calls["TenantCounts"] = s.TenantCounts(ctx, tenant)
	for name, err := range calls {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}
