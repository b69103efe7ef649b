package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// TestClaimAmongIDs covers what the conformance suite leaves to each
// backend: how a claim naming its tasks mixes PENDING tasks with expired
// leases, repeated and unknown IDs, and lists longer than one statement
// binds.
func TestClaimAmongIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		tasks   int
		expired int // of the tasks, how many are IN_FLIGHT with a lease that ran out
		repeat  bool
		unknown int
	}{
		{name: "pending only", tasks: 3},
		{name: "repeated IDs", tasks: 3, repeat: true},
		{name: "expired leases among pending", tasks: 5, expired: 2},
		{name: "unknown IDs", tasks: 2, unknown: 3},
		// More IDs than MaxClaimLimit take the general way, over two lists.
		{name: "longer than one list", tasks: store.MaxClaimLimit, expired: 3, unknown: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := open(t)
			defer s.Close()
			var ids []string
			for i := range tc.tasks {
				tk, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: fmt.Sprint("k", i),
					TargetURL: "http://127.0.0.1:9/", Method: "POST", Body: []byte{byte(i)}, PolicyID: "p",
					CreatedAt: t0, NextAttemptAt: t0.Add(time.Duration(i) * time.Millisecond)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, tk.ID)
			}
			// A task outside the list, due first, must never be taken.
			if _, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: "outside", TargetURL: "http://x/",
				Method: "GET", PolicyID: "p", CreatedAt: t0, NextAttemptAt: t0.Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if tc.expired > 0 {
				first, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0.Add(time.Hour), Lease: time.Second, IDs: ids[:tc.expired]})
				if err != nil || len(first) != tc.expired {
					t.Fatalf("first claim = %d tasks, %v; want %d", len(first), err, tc.expired)
				}
			}
			asked := slices.Clone(ids)
			if tc.repeat {
				asked = append(asked, ids...)
			}
			for range tc.unknown {
				asked = append(asked, store.NewID())
			}
			now := t0.Add(2 * time.Hour)
			got, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: asked})
			if err != nil {
				t.Fatal(err)
			}
			// Earliest due first: the expired leases (due at their lease's
			// end, an hour in) after the others.
			want := append(slices.Clone(ids[tc.expired:]), ids[:tc.expired]...)
			var gotIDs []string
			for _, tk := range got {
				gotIDs = append(gotIDs, tk.ID)
			}
			if i := firstDiff(gotIDs, want); i >= 0 {
				t.Fatalf("claimed %d tasks, want %d; they differ from position %d on", len(gotIDs), len(want), i)
			}
			for i, tk := range got {
				wantAttempt := 1
				if i >= len(got)-tc.expired {
					wantAttempt = 2 // the first claim's attempt was lost and counted
				}
				if tk.Status != store.InFlight || tk.AttemptNumber != wantAttempt || tk.TargetURL != "http://127.0.0.1:9/" ||
					len(tk.Body) != 1 || !tk.LeaseUntil.Equal(now.Add(time.Minute)) {
					t.Fatalf("claimed task %d = %s attempt %d url %q body %v lease %v; want IN_FLIGHT, attempt %d, its request, lease %v",
						i, tk.Status, tk.AttemptNumber, tk.TargetURL, tk.Body, tk.LeaseUntil, wantAttempt, now.Add(time.Minute))
				}
			}
			counts, err := s.TaskCounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := counts[store.InFlight], int64(tc.tasks); got != want {
				t.Errorf("IN_FLIGHT count = %d, want %d", got, want)
			}
			if got, want := counts[store.Pending], int64(1); got != want {
				t.Errorf("PENDING count = %d, want %d (the task outside the list)", got, want)
			}
		})
	}
}

// firstDiff returns the first position where a and b differ, or -1.
func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}
