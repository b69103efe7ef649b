package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// refTask returns newTask(tn, key) with its body held by reference.
func refTask(tn, key string) *store.Task {
	in := newTask(tn, key)
	in.Body, in.BodyRef, in.BodySize = nil, "blob:sha256:"+fmt.Sprintf("%064x", len(key))+key, 5<<30
	return in
}

// checkBodyRef fails t unless got holds want's body reference and size,
// and no inline body.
func checkBodyRef(t *testing.T, what string, got, want *store.Task) {
	t.Helper()
	if got.BodyRef != want.BodyRef || got.BodySize != want.BodySize || len(got.Body) != 0 {
		t.Errorf("%s: body ref %q size %d body %d bytes, want ref %q size %d and no body", what, got.BodyRef,
			got.BodySize, len(got.Body), want.BodyRef, want.BodySize)
	}
}

func testBodyRef(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := refTask(tenant, "k1")
		in.BodyBinary = true
		want := *in
		created := create(t, s, in)
		checkRequest(t, created, &want)
		checkBodyRef(t, "created", created, &want)
		checkBodyRef(t, "got", get(t, s, tenant, created.ID), &want)

		again, made, err := s.TaskCreate(ctx, refTask(tenant, "k1"))
		if err != nil || made || again.ID != created.ID {
			t.Fatalf("repeat = %v created %v, %v; want task %s", again, made, err, created.ID)
		}
		checkBodyRef(t, "repeat", again, &want)

		items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{})
		if err != nil || len(items) != 1 {
			t.Fatalf("TaskList = %d items, %v; want 1", len(items), err)
		}
		checkBodyRef(t, "listed", items[0], &want)

		c := claimOne(t, s, t0, created.ID)
		checkBodyRef(t, "claimed", c, &want)
		finish(t, s, c, store.Failed, t0.Add(time.Second))
		checkBodyRef(t, "finished", get(t, s, tenant, created.ID), &want)
		back, err := redrive(s, tenant, created.ID, t0.Add(2*time.Second))
		if err != nil {
			t.Fatalf("redrive = %v", err)
		}
		checkBodyRef(t, "redriven", back, &want)
		c = claimOne(t, s, t0.Add(2*time.Second), created.ID)
		checkBodyRef(t, "claimed after the redrive", c, &want)
		// An expired lease's reclaim reads the task again.
		c = claimOne(t, s, t0.Add(time.Hour), created.ID)
		checkBodyRef(t, "reclaimed", c, &want)
		finish(t, s, c, store.Succeeded, t0.Add(time.Hour))
		checkBodyRef(t, "succeeded", get(t, s, tenant, created.ID), &want)
	})
	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		inline := newTask(tenant, "inline")
		both := refTask(tenant, "both")
		both.Body = []byte("x")
		in := []*store.Task{refTask(tenant, "r1"), inline, both, refTask("tenant-b", "r2"), refTask(tenant, "r1")}
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil || len(res) != len(in) {
			t.Fatalf("TaskCreateBatch = %d results, %v; want %d", len(res), err, len(in))
		}
		wantErr(t, "item with a body and a body ref", res[2].Err, store.ErrInvalid)
		for _, i := range []int{0, 1, 3, 4} {
			if res[i].Err != nil || res[i].Created != (i != 4) {
				t.Fatalf("item %d = %+v, want created %v", i, res[i], i != 4)
			}
			got := get(t, s, in[i].Tenant, res[i].Task.ID)
			if i == 1 {
				checkRequest(t, got, inline)
				if got.BodyRef != "" || got.BodySize != int64(len(inline.Body)) {
					t.Errorf("inline item: ref %q size %d, want none and %d", got.BodyRef, got.BodySize, len(inline.Body))
				}
				continue
			}
			checkBodyRef(t, fmt.Sprintf("item %d created", i), res[i].Task, in[i])
			checkBodyRef(t, fmt.Sprintf("item %d got", i), got, in[i])
		}
		if res[4].Task.ID != res[0].Task.ID {
			t.Errorf("repeat in the batch = task %s, want %s", res[4].Task.ID, res[0].Task.ID)
		}
		got := claim(t, s, t0, 10)
		if len(got) != 3 {
			t.Fatalf("claimed %d tasks, want 3", len(got))
		}
		for _, c := range got {
			if c.ID != res[1].Task.ID {
				checkBodyRef(t, "claimed "+c.IdempotencyKey, c, refTask(c.Tenant, c.IdempotencyKey))
			}
		}
	})
	t.Run("body and body ref are exclusive", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := refTask(tenant, "k1")
		in.Body = []byte(`{"x":1}`)
		_, _, err := s.TaskCreate(ctx, in)
		wantErr(t, "TaskCreate(body and body ref)", err, store.ErrInvalid)
		if items, _, err := s.TaskList(ctx, store.TaskFilter{}, store.Page{}); err != nil || len(items) != 0 {
			t.Errorf("TaskList = %d items, %v; want none stored", len(items), err)
		}
		// An empty body beside the reference is no body.
		in.Body = []byte{}
		create(t, s, in)
	})
	t.Run("body size", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		neg := refTask(tenant, "negative")
		neg.BodySize = -1
		_, _, err := s.TaskCreate(ctx, neg)
		wantErr(t, "TaskCreate(negative size)", err, store.ErrInvalid)
		wrong := newTask(tenant, "wrong")
		wrong.BodySize = int64(len(wrong.Body)) + 1
		_, _, err = s.TaskCreate(ctx, wrong)
		wantErr(t, "TaskCreate(inline body of another size)", err, store.ErrInvalid)
		for i, given := range []bool{false, true} {
			in := newTask(tenant, fmt.Sprint("inline-", i))
			if given {
				in.BodySize = int64(len(in.Body))
			}
			size := in.BodySize
			got := create(t, s, in)
			if got.BodySize != int64(len(in.Body)) || got.BodyRef != "" {
				t.Errorf("inline body given size %d: created with size %d ref %q, want %d", size, got.BodySize,
					got.BodyRef, len(in.Body))
			}
			if got := get(t, s, tenant, got.ID); got.BodySize != int64(len(in.Body)) {
				t.Errorf("inline body given size %d: stored size %d, want %d", size, got.BodySize, len(in.Body))
			}
		}
		zero := refTask(tenant, "empty object")
		zero.BodySize = 0
		checkBodyRef(t, "empty object", create(t, s, zero), zero)
	})
}
