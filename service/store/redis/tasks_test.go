package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
	"github.com/retrykit/retry/service/store/storetest"
)

// A create cut short after reserving its idempotency key and ID (a crash
// between TaskCreate's two steps) leaves no task; repeating the request
// makes it, with the reserved ID, and a conflicting request still
// conflicts.
func TestCreateCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url)))
	in := &store.Task{ID: store.NewID(), Tenant: "acme", IdempotencyKey: "k1", RequestHash: "h1", PolicyID: "p",
		TargetURL: "http://127.0.0.1:9/", Method: "POST", CreatedAt: t0, NextAttemptAt: t0}
	if err := redis.CreateCutShort(ctx, s, in); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TaskGet(ctx, "acme", in.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TaskGet of the unfinished task = %v, want ErrNotFound", err)
	}
	if items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "acme"}, store.Page{}); err != nil || len(items) != 0 {
		t.Errorf("TaskList = %d tasks, %v; want none", len(items), err)
	}
	if items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "acme", IdempotencyKey: "k1"}, store.Page{}); err != nil ||
		len(items) != 0 {
		t.Errorf("TaskList(its key) = %d tasks, %v; want none", len(items), err)
	}
	other := *in
	other.ID, other.RequestHash = "", "h2"
	if _, _, err := s.TaskCreate(ctx, &other); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TaskCreate(other request, same key) = %v, want ErrConflict", err)
	}

	repeat := *in
	repeat.ID = "" // the client never learnt the ID
	got, created, err := s.TaskCreate(ctx, &repeat)
	if err != nil || !created || got.ID != in.ID {
		t.Fatalf("repeated TaskCreate = %v created %v, %v; want task %s created", got, created, err, in.ID)
	}
	if _, err := s.TaskGet(ctx, "acme", in.ID); err != nil {
		t.Errorf("TaskGet after the repeat = %v", err)
	}
	if _, created, err := s.TaskCreate(ctx, &repeat); err != nil || created {
		t.Errorf("third TaskCreate = created %v, %v; want the task, not created", created, err)
	}
}

// The attempt log keeps the latest attempts, and its pages count from the
// task's first attempt.
func TestAttemptLogCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithAttemptLogCap(3)))
	tk := createIn(t, s, "acme", "p", 1, 0)[0]
	at := t0
	for range 5 {
		finishAs(t, s, claimOne(t, s, tk.ID, at), store.Pending, at.Add(time.Second))
		at = at.Add(time.Second)
	}
	var pages [][]int
	token := ""
	for {
		items, next, err := s.AttemptList(ctx, "acme", tk.ID, store.Page{Token: token, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		var page []int
		for _, a := range items {
			page = append(page, a.AttemptNumber)
		}
		pages = append(pages, page)
		if next == "" {
			break
		}
		token = next
	}
	if got, want := fmt.Sprint(pages), "[[3 4] [5]]"; got != want {
		t.Errorf("pages = %s, want %s", got, want)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		wantErr error // nil: any error
	}{
		{name: "not a URL", url: "redis://a b:c", wantErr: store.ErrInvalid},
		{name: "unknown scheme", url: "mysql://127.0.0.1/", wantErr: store.ErrInvalid},
		{name: "unknown option", url: "redis://127.0.0.1:6379/0?flavour=mint", wantErr: store.ErrInvalid},
		{name: "nobody listening", url: fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := redis.Open(ctx, tt.url, redis.WithLogger(quiet))
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) = nil error", tt.url)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Open(%s) = %v, want %v", tt.url, err, tt.wantErr)
			}
		})
	}
}

// A TaskList matching a TargetHost task by task examines a bounded number
// of list entries: past them, the page ends short (here empty) with a
// token that resumes the walk, and the walk still finds every task.
func TestTaskListHostBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url)))
	mk := func(key, target string) *store.Task {
		return &store.Task{Tenant: "acme", IdempotencyKey: key, RequestHash: "h", PolicyID: "p", TargetURL: target,
			Method: "POST", CreatedAt: t0, NextAttemptAt: t0}
	}
	first, _, err := s.TaskCreate(ctx, mk("first", "http://rare.example/"))
	if err != nil {
		t.Fatal(err)
	}
	const others = 6000 // more than one call examines
	for n := 0; n < others; n += 1000 {
		batch := make([]*store.Task, 1000)
		for i := range batch {
			batch[i] = mk(fmt.Sprintf("o%d", n+i), "http://common.example/")
		}
		if _, err := s.TaskCreateBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	f := store.TaskFilter{Tenant: "acme", TargetHost: "RARE.example"}
	var got []*store.Task
	token, calls := "", 0
	for {
		items, next, err := s.TaskList(ctx, f, store.Page{Token: token, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if calls == 1 && (len(items) != 0 || next == "") {
			t.Errorf("first page = %d tasks, token %q; want none and a token (the budget spent)", len(items), next)
		}
		got = append(got, items...)
		if next == "" {
			break
		}
		if calls > 3 {
			t.Fatalf("%d calls and the walk goes on", calls)
		}
		token = next
	}
	if len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("listed %d tasks, want the rare host's one", len(got))
	}
}

// A store written before tenant counts were kept gets them from its list
// indexes at the first TenantCounts, and keeps them after.
func TestTenantCountsBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	s := closeAtEnd(t, open(t, url, prefix, redis.WithPartitions(4)))
	mk := func(tn, key, policy string) *store.Task {
		got, _, err := s.TaskCreate(ctx, &store.Task{Tenant: tn, IdempotencyKey: key, RequestHash: "h", PolicyID: policy,
			TargetURL: "http://127.0.0.1:9/", Method: "POST", CreatedAt: t0, NextAttemptAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	var acme []*store.Task
	for i := range 12 {
		acme = append(acme, mk("acme", fmt.Sprintf("k%d", i), fmt.Sprintf("p%d", i%5))) // over several partitions
	}
	mk("other:acme", "k0", "p0")
	claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: time.Minute, Limit: 5,
		IDs: []string{acme[0].ID, acme[1].ID, acme[2].ID, acme[3].ID, acme[4].ID}})
	if err != nil || len(claimed) != 5 {
		t.Fatalf("TaskClaim = %d, %v", len(claimed), err)
	}
	var fs []store.Finish
	for i, c := range claimed[:3] {
		st := []store.Status{store.Succeeded, store.Failed, store.Pending}[i]
		fs = append(fs, store.Finish{TaskID: c.ID, Version: c.Version, Status: st, Now: t0, NextAttemptAt: t0})
	}
	if _, err := s.TaskFinish(ctx, fs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TaskTransition(ctx, store.Transition{Tenant: "acme", TaskID: acme[11].ID,
		From: []store.Status{store.Pending}, To: store.Cancelled, Now: t0}); err != nil {
		t.Fatal(err)
	}
	want := map[store.Status]int64{store.Pending: 7, store.InFlight: 2, store.Succeeded: 1, store.Failed: 1,
		store.Exhausted: 0, store.Cancelled: 1}
	check := func(when string, s *redis.Store, tn string, want map[store.Status]int64) {
		t.Helper()
		got, err := s.TenantCounts(ctx, tn)
		if err != nil {
			t.Fatalf("%s: TenantCounts(%s) = %v", when, tn, err)
		}
		for st, n := range want {
			if got[st] != n {
				t.Errorf("%s: TenantCounts(%s)[%s] = %d, want %d", when, tn, st, got[st], n)
			}
		}
	}
	check("kept", s, "acme", want)

	// As an older store would be: no tenant counts, and a count below
	// zero that a purge of an older task left.
	if err := redis.ForgetTenantCounts(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := redis.AddTenantCount(ctx, s, 1, "SUCCEEDED", "gone", -1); err != nil {
		t.Fatal(err)
	}
	// Another instance, which does not make the store, fills them in.
	s2 := closeAtEnd(t, open(t, url, prefix))
	check("filled", s2, "acme", want)
	check("filled", s2, "other:acme", map[store.Status]int64{store.Pending: 1})
	check("filled", s2, "gone", map[store.Status]int64{store.Succeeded: 0})
	// And they are kept from then on.
	if _, err := s2.TaskTransition(ctx, store.Transition{Tenant: "acme", TaskID: acme[10].ID,
		From: []store.Status{store.Pending}, To: store.Cancelled, Now: t0}); err != nil {
		t.Fatal(err)
	}
	want[store.Pending]--
	want[store.Cancelled]++
	check("kept after", s, "acme", want)
	check("kept after", s2, "acme", want)
}

// A claim among thousands of candidates, more than Lua's stack holds
// values, finds every due one, past the first few thousand too.
func TestClaimAmongManyCandidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url)))
	ids := storetest.Seed(t, s, 4100, 32, 1) // one policy: one partition
	now := storetest.BenchStart.Add(time.Millisecond)
	claim := func(ids []string) []*store.Task {
		t.Helper()
		claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: ids, Limit: store.MaxClaimLimit})
		if err != nil {
			t.Fatal(err)
		}
		return claimed
	}
	for range 4 { // the first 4,000, leased
		if got := claim(ids[:4000]); len(got) != store.MaxClaimLimit {
			t.Fatalf("TaskClaim = %d tasks, want %d", len(got), store.MaxClaimLimit)
		}
	}
	// Only the last 100 candidates are still due.
	got := claim(ids)
	want := map[string]bool{}
	for _, id := range ids[4000:] {
		want[id] = true
	}
	for _, c := range got {
		if !want[c.ID] {
			t.Errorf("claimed %s, which was leased already", c.ID)
		}
	}
	if len(got) != len(want) {
		t.Errorf("TaskClaim(all %d IDs) = %d tasks, want the last %d", len(ids), len(got), len(want))
	}
}
