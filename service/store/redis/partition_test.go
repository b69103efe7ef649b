package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

var t0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// now is when the tests of this file claim: every task createIn made
// with an offset ≤ 0 is due.
var now = t0.Add(time.Minute)

// policyIn returns a policy ID whose tasks of tenant go to partition part.
func policyIn(s *redis.Store, tenant string, part int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprint("policy-", i); s.Partition(tenant, id) == part {
			return id
		}
	}
}

// createIn creates n tasks of tenant with policy, due at t0+offset+i ms.
func createIn(t *testing.T, s *redis.Store, tenant, policy string, n int, offset time.Duration) []*store.Task {
	t.Helper()
	out := make([]*store.Task, n)
	for i := range out {
		tk, created, err := s.TaskCreate(context.Background(), &store.Task{Tenant: tenant, PolicyID: policy,
			IdempotencyKey: fmt.Sprint(policy, "-", offset, "-", i), TargetURL: "http://127.0.0.1:9/", Method: "POST",
			CreatedAt: t0, NextAttemptAt: t0.Add(offset + time.Duration(i)*time.Millisecond)})
		if err != nil || !created {
			t.Fatalf("TaskCreate = created %v, %v", created, err)
		}
		out[i] = tk
	}
	return out
}

func TestPartitionsAreRecorded(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	closeAtEnd(t, open(t, url, prefix, redis.WithPartitions(8)))
	tests := []struct {
		name    string
		opts    []redis.Option
		want    int
		wantErr error
	}{
		{name: "the recorded number", opts: []redis.Option{redis.WithPartitions(8)}, want: 8},
		{name: "unset takes the recorded number", want: 8},
		{name: "another number conflicts", opts: []redis.Option{redis.WithPartitions(4)}, wantErr: store.ErrConflict},
		{name: "too many", opts: []redis.Option{redis.WithPartitions(redis.MaxPartitions + 1)}, wantErr: store.ErrInvalid},
		{name: "claim partition out of range", opts: []redis.Option{redis.WithClaimPartitions(2, 8)}, wantErr: store.ErrInvalid},
		{name: "claim no partition", opts: []redis.Option{redis.WithClaimPartitions()}, wantErr: store.ErrInvalid},
		{name: "brace in the prefix", opts: []redis.Option{redis.WithPrefix("a{b}:")}, wantErr: store.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := append([]redis.Option{redis.WithPrefix(prefix), redis.WithLogger(quiet)}, tt.opts...)
			s, err := redis.Open(context.Background(), url, opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open = %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				defer s.Close()
				if got := s.Partitions(); got != tt.want {
					t.Errorf("Partitions() = %d, want %d", got, tt.want)
				}
			}
		})
	}
}

func TestNewStoreTakesDefaultPartitions(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url)))
	if got, want := s.Partitions(), redis.DefaultPartitions; got != want {
		t.Errorf("Partitions() = %d, want %d", got, want)
	}
	if got := s.ClaimPartitions(); len(got) != redis.DefaultPartitions || got[0] != 0 {
		t.Errorf("ClaimPartitions() = %v, want all", got)
	}
}

// An instance given a subset of the partitions claims from those only,
// with or without IDs, and another instance claims the rest.
func TestClaimPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	all := closeAtEnd(t, open(t, url, prefix, redis.WithPartitions(4)))
	mine := createIn(t, all, "acme", policyIn(all, "acme", 1), 3, 0)
	mine = append(mine, createIn(t, all, "acme", policyIn(all, "acme", 3), 2, 0)...)
	theirs := createIn(t, all, "acme", policyIn(all, "acme", 0), 3, 0)
	theirs = append(theirs, createIn(t, all, "acme", policyIn(all, "acme", 2), 2, 0)...)
	sub := closeAtEnd(t, open(t, url, prefix, redis.WithClaimPartitions(3, 1)))
	if got := sub.ClaimPartitions(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("ClaimPartitions() = %v, want [1 3]", got)
	}
	// What a scheduler rebuilds its heap from is what it may claim.
	var due []string
	if err := sub.TaskDue(ctx, func(d store.Due) { due = append(due, d.ID) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(due)
	if want := ids(mine); !slices.Equal(due, slices.Sorted(slices.Values(want))) {
		t.Errorf("TaskDue of partitions 1 and 3 = %v, want %v", due, want)
	}

	got, err := sub.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 100,
		IDs: []string{theirs[0].ID, theirs[4].ID, mine[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, "claimed by ID", got, mine[:1])
	got, err = sub.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, "claimed", got, mine[1:])
	got, err = all.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, "claimed by the instance of every partition", got, theirs)
}

func sameSet(t *testing.T, what string, got, want []*store.Task) {
	t.Helper()
	sorted := func(ts []*store.Task) []string {
		out := ids(ts)
		slices.Sort(out)
		return out
	}
	if g, w := sorted(got), sorted(want); !slices.Equal(g, w) {
		t.Errorf("%s = %v, want %v", what, g, w)
	}
}

// One partition's backlog does not starve another partition's tasks, even
// though they are due later: the limit is shared out.
func TestClaimIsFairAcrossPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithPartitions(4)))
	backlog := createIn(t, s, "big", policyIn(s, "big", 0), 40, -time.Hour)
	small := createIn(t, s, "small", policyIn(s, "small", 2), 3, 0)
	other := createIn(t, s, "other", policyIn(s, "other", 3), 30, -time.Minute)

	got, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 9})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for i, tk := range got {
		count[tk.Tenant]++
		if i > 0 && tk.NextAttemptAt.Before(got[i-1].NextAttemptAt) {
			t.Errorf("claimed out of due order: %v after %v", tk.NextAttemptAt, got[i-1].NextAttemptAt)
		}
	}
	if want := map[string]int{"big": 3, "small": 3, "other": 3}; fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("claimed per tenant %v, want %v", count, want)
	}
	// Within a partition, earliest due first.
	sameSet(t, "claimed of the backlog", pick(got, "big"), backlog[:3])
	sameSet(t, "claimed of the small partition", pick(got, "small"), small)
	sameSet(t, "claimed of the other partition", pick(got, "other"), other[:3])

	// A partition that needs less than its share leaves it to the others.
	got, err = s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, "second claim", got, append(backlog[3:13], other[3:13]...))
}

func pick(ts []*store.Task, tenant string) []*store.Task {
	var out []*store.Task
	for _, tk := range ts {
		if tk.Tenant == tenant {
			out = append(out, tk)
		}
	}
	return out
}

// Lists merge the partitions: newest first across them, pages of any size,
// with and without filters.
func TestListAcrossPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithPartitions(4)))
	var created []*store.Task
	for i := range 12 {
		tenant := []string{"acme", "globex"}[i%2]
		created = append(created, createIn(t, s, tenant, policyIn(s, tenant, i%4), 1, time.Duration(i)*time.Hour)...)
	}
	// Finished tasks move to other indexes, and stay in creation order.
	for _, i := range []int{1, 4, 6} {
		finishAs(t, s, claimOne(t, s, created[i].ID, now.Add(12*time.Hour)), store.Succeeded, time.Time{})
	}
	newestFirst := func(keep func(i int) bool) []*store.Task {
		var out []*store.Task
		for i := len(created) - 1; i >= 0; i-- {
			if keep(i) {
				out = append(out, created[i])
			}
		}
		return out
	}
	done := func(i int) bool { return i == 1 || i == 4 || i == 6 }
	tests := []struct {
		name string
		f    store.TaskFilter
		want []*store.Task
	}{
		{name: "every task", want: newestFirst(func(int) bool { return true })},
		{name: "a tenant", f: store.TaskFilter{Tenant: "acme"}, want: newestFirst(func(i int) bool { return i%2 == 0 })},
		{name: "succeeded", f: store.TaskFilter{Statuses: []store.Status{store.Succeeded}}, want: newestFirst(done)},
		{name: "a tenant's pending", f: store.TaskFilter{Tenant: "globex", Statuses: []store.Status{store.Pending}},
			want: newestFirst(func(i int) bool { return i%2 == 1 && !done(i) })},
		{name: "a policy of every tenant", f: store.TaskFilter{PolicyID: created[2].PolicyID},
			want: newestFirst(func(i int) bool { return created[i].PolicyID == created[2].PolicyID })},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 3, 100} {
			t.Run(fmt.Sprintf("%s, pages of %d", tt.name, size), func(t *testing.T) {
				t.Parallel()
				var got []*store.Task
				token := ""
				for {
					items, next, err := s.TaskList(ctx, tt.f, store.Page{Token: token, Limit: size})
					if err != nil || len(items) > size {
						t.Fatalf("TaskList = %d items, %v", len(items), err)
					}
					got = append(got, items...)
					if next == "" {
						break
					}
					token = next
				}
				if g, w := ids(got), ids(tt.want); !slices.Equal(g, w) {
					t.Errorf("listed %v, want %v", g, w)
				}
			})
		}
	}
}

func ids(ts []*store.Task) []string {
	out := make([]string, len(ts))
	for i, tk := range ts {
		out[i] = tk.ID
	}
	return out
}
