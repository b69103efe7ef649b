package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// withURL returns a task request of tn and key whose target is url.
func withURL(tn, key, url string) *store.Task {
	in := newTask(tn, key)
	in.TargetURL = url
	return in
}

func testTaskListTargetHost(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	const tb = "tenant-b"
	mk := func(tn, key, url string) *store.Task { return create(t, s, withURL(tn, key, url)) }
	a1 := mk(tenant, "a1", "http://api.example.com/hook")
	a2 := mk(tenant, "a2", "https://API.Example.COM/x") // the host in other case
	a3 := mk(tenant, "a3", "http://api.example.com:8080/hook")
	in := withURL(tenant, "a4", "https://user:pw@api.example.com/p?next=http://other.example/#frag")
	in.PolicyID = "policy-2"
	a4 := create(t, s, in)
	a5 := mk(tenant, "a5", "http://other.example/?u=http://api.example.com/")
	a6 := mk(tenant, "a6", "http://api.example.com.evil.test/") // the host is a prefix of this one
	a7 := mk(tenant, "a7", "http://api.example.co/")            // this one of the host
	a8 := mk(tenant, "a8", "http://[::1]:9000/x")
	a9 := mk(tenant, "a9", "http://api.example.com:80/hook") // a port written is part of the host
	b1 := mk(tb, "b1", "http://api.example.com/")
	finish(t, s, claimOne(t, s, t0, a1.ID), store.Succeeded, t0)
	claimOne(t, s, t0, a2.ID)

	const host = "api.example.com"
	pending, inFlight := []store.Status{store.Pending}, []store.Status{store.InFlight}
	tests := []struct {
		name string
		f    store.TaskFilter
		want []*store.Task
	}{
		{"host", store.TaskFilter{Tenant: tenant, TargetHost: host}, []*store.Task{a1, a2, a4}},
		{"host in other case", store.TaskFilter{Tenant: tenant, TargetHost: "API.EXAMPLE.Com"}, []*store.Task{a1, a2, a4}},
		{"host and port", store.TaskFilter{Tenant: tenant, TargetHost: host + ":8080"}, []*store.Task{a3}},
		{"host and the port 80 written", store.TaskFilter{Tenant: tenant, TargetHost: host + ":80"}, []*store.Task{a9}},
		{"host and a port no URL has", store.TaskFilter{Tenant: tenant, TargetHost: host + ":8081"}, nil},
		{"part of a host", store.TaskFilter{Tenant: tenant, TargetHost: "api.example"}, nil},
		{"longer host", store.TaskFilter{Tenant: tenant, TargetHost: "api.example.com.evil.test"}, []*store.Task{a6}},
		{"shorter host", store.TaskFilter{Tenant: tenant, TargetHost: "api.example.co"}, []*store.Task{a7}},
		{"host in the query only", store.TaskFilter{Tenant: tenant, TargetHost: "other.example"}, []*store.Task{a5}},
		{"IPv6 address", store.TaskFilter{Tenant: tenant, TargetHost: "[::1]:9000"}, []*store.Task{a8}},
		{"other tenant", store.TaskFilter{Tenant: tb, TargetHost: host}, []*store.Task{b1}},
		{"every tenant", store.TaskFilter{TargetHost: host}, []*store.Task{a1, a2, a4, b1}},
		{"host and status", store.TaskFilter{Tenant: tenant, TargetHost: host, Statuses: pending}, []*store.Task{a4}},
		{"host and in flight", store.TaskFilter{Tenant: tenant, TargetHost: host, Statuses: inFlight}, []*store.Task{a2}},
		{"host and statuses", store.TaskFilter{Tenant: tenant, TargetHost: host,
			Statuses: []store.Status{store.Succeeded, store.Pending}}, []*store.Task{a1, a4}},
		{"host and policy", store.TaskFilter{Tenant: tenant, TargetHost: host, PolicyID: "policy-2"}, []*store.Task{a4}},
		{"host and other policy", store.TaskFilter{Tenant: tenant, TargetHost: host, PolicyID: "policy-1"},
			[]*store.Task{a1, a2}},
		{"unknown host", store.TaskFilter{Tenant: tenant, TargetHost: "nowhere.example"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, size := range []int{1, 2, 100} {
				sameList(t, fmt.Sprintf("TaskList by %d", size), listAll(t, s, tt.f, size), newestFirst(tt.want...))
			}
		})
	}
	t.Run("listed tasks are whole", func(t *testing.T) {
		t.Parallel()
		items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant, TargetHost: "API.example.com:8080"}, store.Page{})
		if err != nil || len(items) != 1 {
			t.Fatalf("TaskList = %v, %v", ids(items), err)
		}
		checkRequest(t, items[0], a3)
	})
}

// testTaskListHostPaging pages through a host's tasks spread thin among
// thousands of others: every one of them comes once, in order, whatever a
// store does to bound the work of one page.
func testTaskListHostPaging(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	const host = "sparse.example:8443"
	// The host's tasks, by batch and position: two at the start, one in
	// the middle, two at the end, with more than 5,000 others between the
	// first and the last (more than some stores examine for one page).
	at := map[[2]int]bool{{0, 5}: true, {0, 6}: true, {1, 1000}: true, {2, 1990}: true, {2, 1999}: true}
	var want []*store.Task
	for round := range 3 {
		batch := make([]*store.Task, 0, 2000)
		for i := range cap(batch) {
			key := fmt.Sprintf("r%d-%d", round, i)
			url := fmt.Sprintf("http://other-%d.example/", i%7)
			switch {
			case at[[2]int{round, i}]:
				url = "https://Sparse.Example:8443/hook?" + key
			case i%3 == 0: // the host without the port
				url = "https://sparse.example/hook"
			}
			batch = append(batch, withURL(tenant, key, url))
		}
		res, err := s.TaskCreateBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || !r.Created {
				t.Fatalf("TaskCreateBatch item %d = created %v, %v", i, r.Created, r.Err)
			}
			if at[[2]int{round, i}] {
				want = append(want, r.Task)
			}
		}
	}
	// Another tenant's tasks of the host are not listed with the tenant's.
	create(t, s, withURL("tenant-b", "b", "https://sparse.example:8443/"))
	// The host's tasks come in the order of the whole list (a batch's
	// tasks may be stored in another order than the batch's).
	isWanted := map[string]bool{}
	for _, tk := range want {
		isWanted[tk.ID] = true
	}
	var wantIDs []string
	for _, id := range listAll(t, s, store.TaskFilter{Tenant: tenant}, store.MaxPageLimit) {
		if isWanted[id] {
			wantIDs = append(wantIDs, id)
		}
	}
	if len(wantIDs) != len(want) {
		t.Fatalf("the tenant's list holds %d of the host's %d tasks", len(wantIDs), len(want))
	}
	for _, size := range []int{1, 3, 1000} {
		sameList(t, fmt.Sprintf("TaskList by %d", size), listAll(t, s, store.TaskFilter{Tenant: tenant, TargetHost: host},
			size), wantIDs)
	}
	got := listAll(t, s, store.TaskFilter{Tenant: tenant, TargetHost: host, Statuses: []store.Status{store.Pending}}, 5)
	sameList(t, "TaskList(host, PENDING)", got, wantIDs)
	if got := listAll(t, s, store.TaskFilter{Tenant: tenant, TargetHost: "nowhere.example"}, 10); len(got) != 0 {
		t.Errorf("TaskList(unknown host) = %v, want nothing", got)
	}
}

func testTaskListIdempotencyKey(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	const tb = "tenant-b"
	k1 := create(t, s, withURL(tenant, "k1", "http://one.example/"))
	k2 := create(t, s, newTask(tenant, "k2"))
	k3 := create(t, s, newTask(tenant, "k3"))
	b1 := create(t, s, newTask(tb, "k1")) // the same key, another tenant's
	finish(t, s, claimOne(t, s, t0, k2.ID), store.Succeeded, t0)
	claimOne(t, s, t0, b1.ID)

	tests := []struct {
		name string
		f    store.TaskFilter
		want []*store.Task
	}{
		{"key", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k1"}, []*store.Task{k1}},
		{"key of another tenant", store.TaskFilter{Tenant: tb, IdempotencyKey: "k1"}, []*store.Task{b1}},
		{"key the other tenant lacks", store.TaskFilter{Tenant: tb, IdempotencyKey: "k2"}, nil},
		{"unknown key", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k9"}, nil},
		{"key that prefixes others", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k"}, nil},
		{"key and its status", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k2",
			Statuses: []store.Status{store.Succeeded}}, []*store.Task{k2}},
		{"key and its status among others", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k2",
			Statuses: []store.Status{store.Failed, store.Succeeded, store.Pending}}, []*store.Task{k2}},
		{"key and another status", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k2",
			Statuses: []store.Status{store.Pending}}, nil},
		{"key and IN_FLIGHT", store.TaskFilter{Tenant: tb, IdempotencyKey: "k1",
			Statuses: []store.Status{store.InFlight}}, []*store.Task{b1}},
		{"key and PENDING while IN_FLIGHT", store.TaskFilter{Tenant: tb, IdempotencyKey: "k1",
			Statuses: []store.Status{store.Pending}}, nil},
		{"key and its policy", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k3", PolicyID: "policy-1"},
			[]*store.Task{k3}},
		{"key and another policy", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k3", PolicyID: "policy-2"}, nil},
		{"key and its host", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k1", TargetHost: "ONE.example"},
			[]*store.Task{k1}},
		{"key and another host", store.TaskFilter{Tenant: tenant, IdempotencyKey: "k1", TargetHost: "127.0.0.1:9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sameList(t, "TaskList", listAll(t, s, tt.f, 1), newestFirst(tt.want...))
		})
	}
	t.Run("listed task is whole", func(t *testing.T) {
		t.Parallel()
		items, next, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant, IdempotencyKey: "k1"}, store.Page{Limit: 1})
		if err != nil || len(items) != 1 || next != "" {
			t.Fatalf("TaskList = %v, %q, %v; want k1's task and no token", ids(items), next, err)
		}
		checkRequest(t, items[0], k1)
	})
	t.Run("after a page token", func(t *testing.T) {
		t.Parallel()
		// The first page of the tenant's list ends at k2: k1 comes after
		// it, k2 and k3 do not.
		page, next, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant}, store.Page{Limit: 2})
		if err != nil || len(page) != 2 || page[1].ID != k2.ID || next == "" {
			t.Fatalf("TaskList = %v, %q, %v; want k3, k2 and a token", ids(page), next, err)
		}
		for key, want := range map[string]int{"k1": 1, "k2": 0, "k3": 0} {
			items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant, IdempotencyKey: key}, store.Page{Token: next})
			if err != nil || len(items) != want {
				t.Errorf("TaskList(%s after k2) = %v, %v; want %d", key, ids(items), err, want)
			}
		}
	})
	t.Run("without a tenant", func(t *testing.T) {
		t.Parallel()
		_, _, err := s.TaskList(ctx, store.TaskFilter{IdempotencyKey: "k1"}, store.Page{})
		wantErr(t, "TaskList(key without a tenant)", err, store.ErrInvalid)
	})
	t.Run("bad token", func(t *testing.T) {
		t.Parallel()
		_, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: tenant, IdempotencyKey: "k1"}, store.Page{Token: "garbage"})
		wantErr(t, "TaskList(key, bad token)", err, store.ErrInvalid)
	})
}

// testTaskListKeyPurged: a purged task's key names nothing, and then the
// task created anew with it.
func testTaskListKeyPurged(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	old := create(t, s, newTask(tenant, "k1"))
	finish(t, s, claimOne(t, s, t0, old.ID), store.Succeeded, t0)
	if _, n, err := purger(t, s).TaskPurge(ctx, t0.Add(time.Millisecond), 0); err != nil || n != 1 {
		t.Fatalf("TaskPurge = %d, %v", n, err)
	}
	f := store.TaskFilter{Tenant: tenant, IdempotencyKey: "k1"}
	sameList(t, "TaskList(purged key)", listAll(t, s, f, 10), nil)
	again := create(t, s, newTask(tenant, "k1"))
	sameList(t, "TaskList(key used again)", listAll(t, s, f, 10), []string{again.ID})
}
