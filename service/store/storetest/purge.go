package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// purger returns s as a store.Purger, failing t if it is not one.
func purger(t *testing.T, s store.Store) store.Purger {
	t.Helper()
	p, ok := s.(store.Purger)
	if !ok {
		t.Fatalf("%T is not a store.Purger", s)
	}
	return p
}

// ended creates a task of key holding ref (inline when ""), and ends it
// as status at when: claimed and finished, or cancelled.
func ended(t *testing.T, s store.Store, key, ref string, status store.Status, when time.Time) *store.Task {
	t.Helper()
	in := newTask(tenant, key)
	if ref != "" {
		in.Body, in.BodyRef, in.BodySize = nil, ref, 1<<20
	}
	tk := create(t, s, in)
	if status == store.Cancelled {
		if _, err := cancel(s, tenant, tk.ID, when); err != nil {
			t.Fatalf("cancel(%s) = %v", key, err)
		}
		return tk
	}
	finish(t, s, claimOne(t, s, when, tk.ID), status, when)
	return tk
}

// purge calls TaskPurge and fails t on an error.
func purge(t *testing.T, s store.Store, before time.Time, limit int) ([]string, int) {
	t.Helper()
	refs, n, err := purger(t, s).TaskPurge(context.Background(), before, limit)
	if err != nil {
		t.Fatalf("TaskPurge(%v, %d) = %v", before, limit, err)
	}
	return refs, n
}

func testPurge(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	refA, refB, refC := "blob:sha256:"+fmt.Sprintf("%064x", 0xa), "s3://bucket/b", "blob:sha256:"+fmt.Sprintf("%064x", 0xc)
	t.Run("old terminal tasks only, with their logs", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		old := []*store.Task{
			ended(t, s, "succeeded", refA, store.Succeeded, t0.Add(time.Second)),
			ended(t, s, "failed", refA, store.Failed, t0.Add(2*time.Second)),
			ended(t, s, "exhausted", refB, store.Exhausted, t0.Add(3*time.Second)),
			ended(t, s, "cancelled", "", store.Cancelled, t0.Add(4*time.Second)),
		}
		young := ended(t, s, "young", refC, store.Succeeded, t0.Add(time.Hour))
		pending := create(t, s, refTask(tenant, "pending"))
		inFlight := claimOne(t, s, t0, create(t, s, newTask(tenant, "in-flight")).ID) // its lease long expired
		redriven := ended(t, s, "redriven", refC, store.Failed, t0.Add(5*time.Second))
		if _, err := redrive(s, tenant, redriven.ID, t0.Add(6*time.Second)); err != nil {
			t.Fatal(err)
		}
		retried := create(t, s, newTask(tenant, "retried"))
		finish(t, s, claimOne(t, s, t0, retried.ID), store.Pending, t0)

		refs, n := purge(t, s, t0.Add(10*time.Minute), 0)
		if want := []string{refA, refB}; n != len(old) || !slices.Equal(refs, want) {
			t.Errorf("TaskPurge = refs %q, %d tasks; want %q, %d", refs, n, want, len(old))
		}
		for _, tk := range old {
			if _, err := s.TaskGet(ctx, tenant, tk.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("TaskGet(purged %s) = %v, want ErrNotFound", tk.IdempotencyKey, err)
			}
			if _, _, err := s.AttemptList(ctx, tenant, tk.ID, store.Page{}); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("AttemptList(purged %s) = %v, want ErrNotFound", tk.IdempotencyKey, err)
			}
		}
		kept := []*store.Task{young, pending, inFlight, redriven, retried}
		for _, tk := range kept {
			get(t, s, tenant, tk.ID)
		}
		if log := attempts(t, s, tenant, young.ID); len(log) != 1 {
			t.Errorf("the young task's log has %d attempts, want 1", len(log))
		}
		sameList(t, "TaskList after the purge", listAll(t, s, store.TaskFilter{}, 3), newestFirst(kept...))
		counts, err := s.TaskCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[store.Status]int64{store.Pending: 3, store.InFlight: 1, store.Succeeded: 1}
		for _, st := range []store.Status{store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed,
			store.Cancelled} {
			if counts[st] != want[st] {
				t.Errorf("TaskCounts()[%s] = %d, want %d", st, counts[st], want[st])
			}
		}
		if refs, n := purge(t, s, t0.Add(10*time.Minute), 0); n != 0 || len(refs) != 0 {
			t.Errorf("second TaskPurge = %q, %d; want nothing", refs, n)
		}
		// Now the young task is old enough.
		if refs, n := purge(t, s, t0.Add(2*time.Hour), 0); n != 1 || !slices.Equal(refs, []string{refC}) {
			t.Errorf("later TaskPurge = %q, %d; want [%s], 1", refs, n, refC)
		}
	})
	t.Run("oldest first, limit at a time", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		var tasks []*store.Task
		// Created in the opposite order to the one they end in.
		for i := 4; i >= 0; i-- {
			tasks = append(tasks, ended(t, s, fmt.Sprint("k", i), "", store.Succeeded, t0.Add(time.Duration(i)*time.Second)))
		}
		slices.Reverse(tasks) // tasks[i] ended at t0+i s
		for _, want := range [][]*store.Task{tasks[:2], tasks[2:4], tasks[4:], nil} {
			_, n := purge(t, s, t0.Add(time.Minute), 2)
			if n != len(want) {
				t.Fatalf("TaskPurge(limit 2) = %d tasks, want %d", n, len(want))
			}
			for _, tk := range want {
				if _, err := s.TaskGet(ctx, tenant, tk.ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("TaskGet(%s) = %v, want purged", tk.IdempotencyKey, err)
				}
			}
		}
	})
	t.Run("before is exclusive", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		tk := ended(t, s, "k1", "", store.Succeeded, t0)
		if _, n := purge(t, s, t0, 0); n != 0 {
			t.Errorf("TaskPurge(before its end) = %d tasks, want 0", n)
		}
		get(t, s, tenant, tk.ID)
		if _, n := purge(t, s, t0.Add(time.Millisecond), 0); n != 1 {
			t.Errorf("TaskPurge(after its end) = %d tasks, want 1", n)
		}
	})
	t.Run("idempotency keys are free again", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		same := ended(t, s, "same", "", store.Succeeded, t0)
		other := ended(t, s, "other", "", store.Failed, t0)
		purge(t, s, t0.Add(time.Minute), 0)
		again := create(t, s, newTask(tenant, "same"))
		if again.ID == same.ID || again.Status != store.Pending {
			t.Errorf("created again = %s %s, want a new PENDING task", again.ID, again.Status)
		}
		changed := newTask(tenant, "other")
		changed.RequestHash = "another request"
		if got := create(t, s, changed); got.ID == other.ID {
			t.Errorf("another request under a purged key = task %s, the purged one", got.ID)
		}
		res, err := s.TaskCreateBatch(ctx, []*store.Task{newTask(tenant, "other")})
		wantErr(t, "TaskCreateBatch", err, nil)
		wantErr(t, "repeat with the first request's hash", res[0].Err, store.ErrConflict)
	})
	t.Run("BodyRefsInUse", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		p := purger(t, s)
		inUse := func(refs ...string) map[string]bool {
			t.Helper()
			got, err := p.BodyRefsInUse(ctx, refs)
			if err != nil {
				t.Fatalf("BodyRefsInUse(%q) = %v", refs, err)
			}
			for ref, used := range got {
				if !used || !slices.Contains(refs, ref) {
					t.Errorf("BodyRefsInUse(%q) answers %q: %v", refs, ref, used)
				}
			}
			return got
		}
		if got := inUse(); len(got) != 0 {
			t.Errorf("BodyRefsInUse() = %v, want empty", got)
		}
		create(t, s, refTask(tenant, "live"))
		live := refTask(tenant, "live").BodyRef
		ended(t, s, "shared-1", refA, store.Succeeded, t0)
		ended(t, s, "shared-2", refA, store.Succeeded, t0.Add(time.Hour))
		ended(t, s, "alone", refB, store.Cancelled, t0)
		other := refTask("tenant-b", "x")
		other.BodyRef = refC
		create(t, s, other)
		create(t, s, newTask(tenant, "inline"))
		got := inUse(live, refA, refB, refC, "s3://bucket/unknown", "")
		want := map[string]bool{live: true, refA: true, refB: true, refC: true}
		if !mapsEqual(got, want) {
			t.Errorf("BodyRefsInUse = %v, want %v", got, want)
		}
		refs, n := purge(t, s, t0.Add(time.Minute), 0)
		if n != 2 || !slices.Equal(refs, []string{refA, refB}) {
			t.Fatalf("TaskPurge = %q, %d; want [%s %s], 2", refs, n, refA, refB)
		}
		got = inUse(refs...)
		if !mapsEqual(got, map[string]bool{refA: true}) {
			t.Errorf("BodyRefsInUse(%q) after the purge = %v, want only %s (another task holds it)", refs, got, refA)
		}
		purge(t, s, t0.Add(2*time.Hour), 0)
		if got := inUse(refA, refB, refC, live); !mapsEqual(got, map[string]bool{refC: true, live: true}) {
			t.Errorf("BodyRefsInUse after the last purge = %v, want the live tasks' only", got)
		}
		many := make([]string, 3000) // more than one query's worth
		for i := range many {
			many[i] = fmt.Sprintf("s3://bucket/%d", i)
		}
		many[2999] = live
		if got := inUse(many...); !mapsEqual(got, map[string]bool{live: true}) {
			t.Errorf("BodyRefsInUse(3000 refs) = %v, want only %s", got, live)
		}
	})
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
