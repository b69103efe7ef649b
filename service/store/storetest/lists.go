package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/retrykit/retry/service/store"
)

func testTaskListFilters(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	mk := func(tn, key, policy string) *store.Task {
		in := newTask(tn, key)
		in.PolicyID = policy
		return create(t, s, in)
	}
	a1, a2, a3 := mk(tenant, "a1", "p1"), mk(tenant, "a2", "p2"), mk(tenant, "a3", "p1")
	a4, a5, b1 := mk(tenant, "a4", "p2"), mk(tenant, "a5", "p1"), mk("tenant-b", "b1", "p1")
	finish(t, s, claimOne(t, s, t0, a1.ID), store.Succeeded, t0)
	finish(t, s, claimOne(t, s, t0, a2.ID), store.Failed, t0)
	claimOne(t, s, t0, a3.ID)
	if _, err := s.TaskTransition(ctx, store.Transition{Tenant: tenant, TaskID: a4.ID,
		From: []store.Status{store.Pending}, To: store.Cancelled, Now: t0}); err != nil {
		t.Fatal(err)
	}
	finish(t, s, claimOne(t, s, t0, b1.ID), store.Exhausted, t0)

	dead := []store.Status{store.Exhausted, store.Failed}
	tests := []struct {
		name string
		f    store.TaskFilter
		want []*store.Task
	}{
		{"tenant", store.TaskFilter{Tenant: tenant}, []*store.Task{a1, a2, a3, a4, a5}},
		{"status", store.TaskFilter{Tenant: tenant, Statuses: []store.Status{store.Pending}}, []*store.Task{a5}},
		{"in flight", store.TaskFilter{Tenant: tenant, Statuses: []store.Status{store.InFlight}}, []*store.Task{a3}},
		{"dead letters", store.TaskFilter{Tenant: tenant, Statuses: dead}, []*store.Task{a2}},
		{"dead letters, other order", store.TaskFilter{Tenant: "tenant-b",
			Statuses: []store.Status{store.Failed, store.Exhausted}}, []*store.Task{b1}},
		{"policy", store.TaskFilter{Tenant: tenant, PolicyID: "p1"}, []*store.Task{a1, a3, a5}},
		{"policy and status", store.TaskFilter{Tenant: tenant, PolicyID: "p1",
			Statuses: []store.Status{store.Succeeded, store.Pending}}, []*store.Task{a1, a5}},
		{"every tenant", store.TaskFilter{}, []*store.Task{a1, a2, a3, a4, a5, b1}},
		{"every tenant's live tasks", store.TaskFilter{Statuses: []store.Status{store.Pending, store.InFlight}},
			[]*store.Task{a3, a5}},
		{"every tenant's dead letters", store.TaskFilter{Statuses: dead}, []*store.Task{a2, b1}},
		{"no match", store.TaskFilter{Tenant: tenant, PolicyID: "p9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sameList(t, "TaskList", listAll(t, s, tt.f, 2), newestFirst(tt.want...))
		})
	}
	t.Run("listed tasks are whole", func(t *testing.T) {
		t.Parallel()
		items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant, Statuses: []store.Status{store.InFlight}}, store.Page{})
		if err != nil || len(items) != 1 {
			t.Fatalf("TaskList = %v, %v", ids(items), err)
		}
		checkRequest(t, items[0], a3)
		if items[0].Status != store.InFlight || items[0].AttemptNumber != 1 || items[0].LeaseUntil.IsZero() {
			t.Errorf("listed task = %s attempt %d lease %v, want IN_FLIGHT 1 leased", items[0].Status,
				items[0].AttemptNumber, items[0].LeaseUntil)
		}
	})
	t.Run("unknown status is invalid", func(t *testing.T) {
		t.Parallel()
		_, _, err := s.TaskList(ctx, store.TaskFilter{Statuses: []store.Status{"DONE'--"}}, store.Page{})
		wantErr(t, "TaskList(unknown status)", err, store.ErrInvalid)
	})
}

func testTaskListPaging(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	t.Run("creates between pages", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		old := createN(t, s, tenant, "old", 25)
		var got []string
		token := ""
		for page := 0; ; page++ {
			items, next, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{Token: token, Limit: 7})
			if err != nil {
				t.Fatalf("TaskList(page %d) = %v", page, err)
			}
			got = append(got, ids(items)...)
			createN(t, s, tenant, fmt.Sprintf("new%d", page), 2) // lands before the pages already read
			if next == "" {
				break
			}
			token = next
		}
		sameList(t, "pages", got, newestFirst(old...))
		first, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{Limit: 1})
		if err != nil || len(first) != 1 || first[0].IdempotencyKey != "new3-1" {
			t.Errorf("newest task = %v, %v; want the last created (new3-1)", first, err)
		}
	})
	t.Run("default page size", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < store.DefaultPageLimit+1; i += 8 {
					if _, _, err := s.TaskCreate(ctx, newTask(tenant, fmt.Sprintf("k%d", i))); err != nil {
						t.Errorf("TaskCreate = %v", err)
					}
				}
			})
		}
		wg.Wait()
		items, next, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{})
		if err != nil || len(items) != store.DefaultPageLimit || next == "" {
			t.Fatalf("TaskList(Limit 0) = %d items, token %q, %v; want %d and a token", len(items), next, err,
				store.DefaultPageLimit)
		}
		rest, next, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{Token: next, Limit: -1})
		if err != nil || len(rest) != 1 || next != "" {
			t.Errorf("second page = %d items, token %q, %v; want 1 and no token", len(rest), next, err)
		}
	})
	t.Run("bad tokens", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		createN(t, s, tenant, "k", 3)
		_, policyToken, err := func() ([]*store.Policy, string, error) {
			for _, id := range []string{"a", "b"} {
				if _, _, err := s.PolicyPut(ctx, &store.Policy{Tenant: tenant, ID: id, Spec: []byte("{}")}); err != nil {
					return nil, "", err
				}
			}
			return s.PolicyList(ctx, tenant, store.Page{Limit: 1})
		}()
		if err != nil || policyToken == "" {
			t.Fatalf("PolicyList = %q, %v", policyToken, err)
		}
		for _, token := range []string{"garbage", "!!!", "eyJ4IjoxfQ", policyToken} {
			_, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{Token: token})
			wantErr(t, fmt.Sprintf("TaskList(token %q)", token), err, store.ErrInvalid)
		}
	})
}
