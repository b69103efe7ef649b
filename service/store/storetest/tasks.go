package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

func testTaskCreate(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	t.Run("state of a new task", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := newTask(tenant, "k1")
		in.ID = store.NewID()
		in.NextAttemptAt = t0.Add(time.Minute)
		in.Status, in.AttemptNumber, in.Version, in.LastError = store.Failed, 9, 77, "ignored"
		got := create(t, s, in)
		checkRequest(t, got, in)
		if got.Status != store.Pending || got.AttemptNumber != 0 || got.Version != 1 || got.LastError != "" {
			t.Errorf("new task = %s attempt %d version %d lastError %q, want PENDING 0 1 \"\"",
				got.Status, got.AttemptNumber, got.Version, got.LastError)
		}
		if !sameTime(got.NextAttemptAt, in.NextAttemptAt) || !sameTime(got.BudgetStart, t0) ||
			!sameTime(got.UpdatedAt, t0) || !got.FinishedAt.IsZero() || !got.LeaseUntil.IsZero() {
			t.Errorf("times = next %v budget %v updated %v finished %v lease %v, want %v %v %v zero zero",
				got.NextAttemptAt, got.BudgetStart, got.UpdatedAt, got.FinishedAt, got.LeaseUntil,
				in.NextAttemptAt, t0, t0)
		}
		if in.Status != store.Failed || in.Version != 77 {
			t.Errorf("TaskCreate changed its argument: %+v", in)
		}
	})
	t.Run("zero fields take defaults", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		before := time.Now().Truncate(time.Millisecond)
		got := create(t, s, &store.Task{Tenant: tenant, TargetURL: "http://127.0.0.1:9/", Method: "GET"})
		after := time.Now()
		if len(got.ID) != 36 || len(got.IdempotencyKey) != 36 || got.ID == got.IdempotencyKey {
			t.Errorf("generated ID %q key %q, want two UUIDs", got.ID, got.IdempotencyKey)
		}
		if got.CreatedAt.Before(before) || got.CreatedAt.After(after) {
			t.Errorf("CreatedAt = %v, want between %v and %v", got.CreatedAt, before, after)
		}
		if !got.NextAttemptAt.Equal(got.CreatedAt) || !got.BudgetStart.Equal(got.CreatedAt) {
			t.Errorf("NextAttemptAt %v BudgetStart %v, want CreatedAt %v", got.NextAttemptAt, got.BudgetStart, got.CreatedAt)
		}
		if len(got.Body) != 0 || len(got.Headers) != 0 {
			t.Errorf("body %q headers %v, want empty", got.Body, got.Headers)
		}
	})
	t.Run("a taken ID conflicts", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		first := create(t, s, newTask(tenant, "k1"))
		again := newTask("tenant-b", "k2")
		again.ID = first.ID
		_, _, err := s.TaskCreate(ctx, again)
		wantErr(t, "TaskCreate(taken ID)", err, store.ErrConflict)
	})
	t.Run("empty tenant is invalid", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		_, _, err := s.TaskCreate(ctx, newTask("", "k1"))
		wantErr(t, "TaskCreate(no tenant)", err, store.ErrInvalid)
	})
}

func testTaskRoundTrip(t *testing.T, newStore NewStore) {
	binary := make([]byte, 512)
	for i := range binary {
		binary[i] = byte(i)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16) // 2 MiB
	tests := []struct {
		name   string
		change func(*store.Task)
	}{
		{"plain", func(*store.Task) {}},
		{"no headers, no body", func(tk *store.Task) { tk.Headers, tk.Body = nil, nil }},
		{"many headers", func(tk *store.Task) {
			tk.Headers = map[string]string{"Authorization": "Bearer x.y.z", "X-Émoji": "✓ ünïcode", "X-Empty": "",
				"X-Quote": `a "b" \c`, "Accept": "*/*"}
		}},
		{"binary body", func(tk *store.Task) { tk.Body, tk.BodyBinary = binary, true }},
		{"big body", func(tk *store.Task) { tk.Body = big }},
		{"times at ms", func(tk *store.Task) {
			tk.CreatedAt = t0.Add(987654321 * time.Nanosecond)
			tk.NextAttemptAt = t0.Add(time.Hour + 123456789*time.Nanosecond)
			tk.BudgetStart = t0.Add(-time.Hour + 1)
		}},
		{"long URL and method", func(tk *store.Task) {
			tk.TargetURL = "https://127.0.0.1:8443/" + strings.Repeat("p/", 2000) + "?q=ü&r=%20"
			tk.Method = "PATCH"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, newStore)
			in := newTask(tenant, "k1")
			tt.change(in)
			want := *in
			created := create(t, s, in)
			got := get(t, s, tenant, created.ID)
			for name, tk := range map[string]*store.Task{"created": created, "got": got} {
				t.Run(name, func(t *testing.T) {
					checkRequest(t, tk, &want)
					if !sameTime(tk.NextAttemptAt, want.NextAttemptAt) {
						t.Errorf("NextAttemptAt = %v, want %v", tk.NextAttemptAt, want.NextAttemptAt)
					}
					if !want.BudgetStart.IsZero() && !sameTime(tk.BudgetStart, want.BudgetStart) {
						t.Errorf("BudgetStart = %v, want %v", tk.BudgetStart, want.BudgetStart)
					}
				})
			}
			// Values are the caller's: changing one changes nothing stored.
			got.Headers = map[string]string{"X-Changed": "1"}
			if len(got.Body) > 0 {
				got.Body[0] ^= 0xff
			}
			checkRequest(t, get(t, s, tenant, created.ID), &want)
		})
	}
}

func testTaskIdempotency(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	t.Run("same request returns the task", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		first := create(t, s, newTask(tenant, "k1"))
		again := newTask(tenant, "k1")
		again.CreatedAt = t0.Add(time.Hour)
		got, created, err := s.TaskCreate(ctx, again)
		if err != nil || created || got.ID != first.ID || !sameTime(got.CreatedAt, t0) {
			t.Fatalf("repeat TaskCreate = %v created %v, %v; want task %s not created", got, created, err, first.ID)
		}
		checkRequest(t, got, first)
	})
	t.Run("other request conflicts", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		first := create(t, s, newTask(tenant, "k1"))
		other := newTask(tenant, "k1")
		other.RequestHash = "another"
		_, _, err := s.TaskCreate(ctx, other)
		wantErr(t, "TaskCreate(other request)", err, store.ErrConflict)
		checkRequest(t, get(t, s, tenant, first.ID), first)
	})
	t.Run("keys are per tenant", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		a := create(t, s, newTask(tenant, "k1"))
		b := create(t, s, newTask("tenant-b", "k1"))
		if a.ID == b.ID {
			t.Fatalf("two tenants' tasks share ID %s", a.ID)
		}
	})
	t.Run("concurrent creates make one task", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		const n = 8
		var wg sync.WaitGroup
		results := make([]string, n)
		createdCount := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				got, created, err := s.TaskCreate(ctx, newTask(tenant, "k1"))
				if err == nil {
					results[i], createdCount[i] = got.ID, created
				}
				errs[i] = err
			})
		}
		wg.Wait()
		made := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("TaskCreate #%d = %v", i, errs[i])
			}
			if results[i] != results[0] {
				t.Errorf("creates returned tasks %s and %s", results[0], results[i])
			}
			if createdCount[i] {
				made++
			}
		}
		if made != 1 {
			t.Errorf("%d creates said created, want 1", made)
		}
	})
}

func testTaskTenants(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	mine := create(t, s, newTask(tenant, "k1"))
	create(t, s, newTask("tenant-b", "k2"))
	tests := []struct {
		name string
		call func() error
	}{
		{"TaskGet", func() error { _, err := s.TaskGet(ctx, "tenant-b", mine.ID); return err }},
		{"TaskGet unknown", func() error { _, err := s.TaskGet(ctx, tenant, store.NewID()); return err }},
		{"cancel", func() error {
			_, err := s.TaskTransition(ctx, store.Transition{Tenant: "tenant-b", TaskID: mine.ID,
				From: []store.Status{store.Pending}, To: store.Cancelled, Now: t0})
			return err
		}},
		{"redrive", func() error {
			_, err := s.TaskTransition(ctx, store.Transition{Tenant: "tenant-b", TaskID: mine.ID,
				From: []store.Status{store.Pending}, To: store.Pending, Now: t0})
			return err
		}},
		{"AttemptList", func() error { _, _, err := s.AttemptList(ctx, "tenant-b", mine.ID, store.Page{}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.name, tt.call(), store.ErrNotFound)
		})
	}
	items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "tenant-b"}, store.Page{})
	if err != nil || len(items) != 1 || items[0].Tenant != "tenant-b" {
		t.Errorf("TaskList(tenant-b) = %v, %v; want its one task", ids(items), err)
	}
	if got := get(t, s, tenant, mine.ID); got.Status != store.Pending || got.Version != mine.Version {
		t.Errorf("after the other tenant's calls the task is %s version %d, want untouched", got.Status, got.Version)
	}
}

// listAll pages through TaskList with pages of size, failing on duplicates.
func listAll(t *testing.T, s store.Store, f store.TaskFilter, size int) []string {
	t.Helper()
	var got []string
	seen := map[string]bool{}
	token := ""
	for {
		items, next, err := s.TaskList(context.Background(), f, store.Page{Token: token, Limit: size})
		if err != nil {
			t.Fatalf("TaskList(%+v) = %v", f, err)
		}
		if len(items) > size {
			t.Fatalf("page of %d items, want at most %d", len(items), size)
		}
		for _, tk := range items {
			if seen[tk.ID] {
				t.Fatalf("TaskList returned %s twice", tk.ID)
			}
			seen[tk.ID] = true
			got = append(got, tk.ID)
		}
		if next == "" {
			return got
		}
		if next == token {
			t.Fatalf("TaskList(%+v) answered its own token %q again: the walk does not move", f, token)
		}
		token = next
	}
}

// newestFirst returns the IDs of ts, last created first.
func newestFirst(ts ...*store.Task) []string {
	out := ids(ts)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func sameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
