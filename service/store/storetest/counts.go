package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// allStatuses are the keys TaskCounts and TenantCounts answer with.
var allStatuses = []store.Status{store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed,
	store.Cancelled}

// checkCounts fails t unless got holds every status, with want's counts
// (absent ones zero).
func checkCounts(t *testing.T, what string, got map[store.Status]int64, want map[store.Status]int64) {
	t.Helper()
	if len(got) != len(allStatuses) {
		t.Errorf("%s = %v, want the %d statuses as keys", what, got, len(allStatuses))
	}
	for _, st := range allStatuses {
		if n, ok := got[st]; !ok || n != want[st] {
			t.Errorf("%s: count of %s = %d (present %v), want %d", what, st, n, ok, want[st])
		}
	}
}

func testTenantCounts(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	// Tenants whose names are prefixes of each other's, or hold the
	// characters a store might join names with, must not share counts.
	const (
		ta = tenant
		tb = tenant + "b"
		tc = "PENDING:" + tenant
	)
	want := map[string]map[store.Status]int64{ta: {}, tb: {}, tc: {}, "": {}, "nobody": {}}
	check := func(when string) {
		t.Helper()
		total := map[store.Status]int64{}
		for tn, w := range want {
			got, err := s.TenantCounts(ctx, tn)
			if err != nil {
				t.Fatalf("%s: TenantCounts(%q) = %v", when, tn, err)
			}
			checkCounts(t, fmt.Sprintf("%s: TenantCounts(%q)", when, tn), got, w)
			for st, n := range w {
				total[st] += n
			}
		}
		got, err := s.TaskCounts(ctx)
		if err != nil {
			t.Fatalf("%s: TaskCounts = %v", when, err)
		}
		checkCounts(t, when+": TaskCounts", got, total)
	}
	check("empty")

	as := createN(t, s, ta, "a", 6)
	bs := createN(t, s, tb, "b", 3)
	cs := createN(t, s, tc, "c", 2)
	// A repeat creates nothing, and a refused reuse of a key neither.
	if _, created, err := s.TaskCreate(ctx, newTask(ta, "a-0")); err != nil || created {
		t.Fatalf("repeat = created %v, %v", created, err)
	}
	clash := newTask(tb, "b-0")
	clash.RequestHash = "another"
	if _, _, err := s.TaskCreate(ctx, clash); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("reuse of a key = %v, want ErrConflict", err)
	}
	want[ta][store.Pending], want[tb][store.Pending], want[tc][store.Pending] = 6, 3, 2
	check("created")

	// A claim of several tenants' tasks at once.
	got := claim(t, s, t0, 5, as[0].ID, as[1].ID, as[2].ID, bs[0].ID, cs[0].ID)
	if len(got) != 5 {
		t.Fatalf("claimed %d tasks, want 5", len(got))
	}
	byID := map[string]*store.Task{}
	for _, c := range got {
		byID[c.ID] = c
	}
	want[ta][store.Pending], want[ta][store.InFlight] = 3, 3
	want[tb][store.Pending], want[tb][store.InFlight] = 2, 1
	want[tc][store.Pending], want[tc][store.InFlight] = 1, 1
	check("claimed")

	// One TaskFinish of several tenants' tasks, to several statuses.
	errs, err := s.TaskFinish(ctx, []store.Finish{
		finishOf(byID[as[0].ID], store.Succeeded, t0),
		finishOf(byID[as[1].ID], store.Failed, t0),
		finishOf(byID[as[2].ID], store.Pending, t0), // a retry
		finishOf(byID[bs[0].ID], store.Exhausted, t0),
		finishOf(byID[cs[0].ID], store.Succeeded, t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("TaskFinish item %d = %v", i, e)
		}
	}
	want[ta] = map[store.Status]int64{store.Pending: 4, store.Succeeded: 1, store.Failed: 1}
	want[tb] = map[store.Status]int64{store.Pending: 2, store.Exhausted: 1}
	want[tc] = map[store.Status]int64{store.Pending: 1, store.Succeeded: 1}
	check("finished")

	// A finish that lost its lease changes nothing.
	if errs, err := s.TaskFinish(ctx, []store.Finish{finishOf(byID[as[0].ID], store.Failed, t0)}); err != nil ||
		!errors.Is(errs[0], store.ErrLeaseLost) {
		t.Fatalf("stale finish = %v, %v; want ErrLeaseLost", errs, err)
	}
	// An expired lease reclaimed stays IN_FLIGHT.
	late := t0.Add(time.Hour)
	claimOne(t, s, t0, as[3].ID)
	claimOne(t, s, late, as[3].ID)
	want[ta][store.Pending], want[ta][store.InFlight] = 3, 1
	check("reclaimed")

	if _, err := cancel(s, ta, as[4].ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := cancel(s, tb, bs[1].ID, t0); err != nil {
		t.Fatal(err)
	}
	// Another tenant's ID is not found, and counts nothing.
	if _, err := cancel(s, tb, as[5].ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel of another tenant's task = %v, want ErrNotFound", err)
	}
	want[ta][store.Pending], want[ta][store.Cancelled] = 2, 1
	want[tb][store.Pending], want[tb][store.Cancelled] = 1, 1
	check("cancelled")

	if _, err := redrive(s, ta, as[1].ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := redrive(s, tb, bs[0].ID, t0); err != nil {
		t.Fatal(err)
	}
	want[ta][store.Pending], want[ta][store.Failed] = 3, 0
	want[tb][store.Pending], want[tb][store.Exhausted] = 2, 0
	check("redriven")

	// Purged tasks are no longer counted.
	_, n, err := purger(t, s).TaskPurge(ctx, t0.Add(time.Millisecond), 0)
	if err != nil || n != 4 {
		t.Fatalf("TaskPurge = %d, %v; want the 4 ended tasks", n, err)
	}
	want[ta][store.Succeeded], want[ta][store.Cancelled] = 0, 0
	want[tb][store.Cancelled] = 0
	want[tc][store.Succeeded] = 0
	check("purged")

	// A batch of several tenants, with repeats (a-0 was purged: its key
	// makes a new task).
	batch := []*store.Task{newTask(ta, "a-new"), newTask(tc, "c-new"), newTask(ta, "a-1"), newTask(tc, "c-new"),
		newTask(ta, "a-0")}
	if _, err := s.TaskCreateBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	want[ta][store.Pending] += 2
	want[tc][store.Pending]++
	check("batch")
}
