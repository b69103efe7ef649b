// Package storetest is the conformance suite of store.Store: every backend
// runs Run, and a semantic of the interface is pinned here or nowhere.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mystore.Open(…) // a new, empty store
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The subtests run in parallel, each on a store of its own, so newStore must
// be safe to call concurrently. Run closes each store when its subtest ends.
// A backend that several processes can share also runs RunShared, with two
// stores on the same data. The tests of store.Feed run for the stores that
// implement it and are skipped for the others.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// NewStore makes a new, empty store for one subtest.
type NewStore func(t *testing.T) store.Store

// Run runs every conformance test against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		run  func(*testing.T, NewStore)
	}{
		{"PolicyPut", testPolicyPut},
		{"PolicyList", testPolicyList},
		{"DestinationCreate", testDestinationCreate},
		{"DestinationUpdate", testDestinationUpdate},
		{"DestinationDelete", testDestinationDelete},
		{"DestinationList", testDestinationList},
		{"DestinationClose", testDestinationClose},
		{"TaskCreate", testTaskCreate},
		{"TaskCreateBatch", testTaskCreateBatch},
		{"TaskRoundTrip", testTaskRoundTrip},
		{"TaskIdempotency", testTaskIdempotency},
		{"BodyRef", testBodyRef},
		{"TaskTenants", testTaskTenants},
		{"TaskListFilters", testTaskListFilters},
		{"TaskListPaging", testTaskListPaging},
		{"TaskListTargetHost", testTaskListTargetHost},
		{"TaskListHostPaging", testTaskListHostPaging},
		{"TaskListIdempotencyKey", testTaskListIdempotencyKey},
		{"TaskListKeyPurged", testTaskListKeyPurged},
		{"Cancel", testCancel},
		{"Redrive", testRedrive},
		{"Claim", testClaim},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimExpiredLease", testClaimExpiredLease},
		{"ClaimLater", testClaimLater},
		{"CreateClaimed", testCreateClaimed},
		{"TaskDue", testTaskDue},
		{"Finish", testFinish},
		{"FinishFencing", testFinishFencing},
		{"FinishHeld", testFinishHeld},
		{"FinishConcurrent", testFinishConcurrent},
		{"AttemptList", testAttemptList},
		{"TaskCounts", testTaskCounts},
		{"TenantCounts", testTenantCounts},
		{"Purge", testPurge},
		{"Reseal", testReseal},
		{"Close", testClose},
		{"Feed", testFeed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newStore)
		})
	}
}

// t0 is the suite's "now": times are passed explicitly, never read from
// the clock, so nothing here depends on timing.
var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.UTC)

const tenant = "tenant-a"

// setup returns a new store that is closed when t ends.
func setup(t *testing.T, newStore NewStore) store.Store {
	t.Helper()
	s := newStore(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s
}

// newTask returns a task request due at t0, whose request hash follows key.
func newTask(tn, key string) *store.Task {
	return &store.Task{
		Tenant:         tn,
		IdempotencyKey: key,
		RequestHash:    "hash-" + key,
		TargetURL:      "http://127.0.0.1:9/hook?k=" + key,
		Method:         "POST",
		Headers:        map[string]string{"Content-Type": "application/json"},
		Body:           []byte(`{"key":"` + key + `"}`),
		PolicyID:       "policy-1",
		CreatedAt:      t0,
		NextAttemptAt:  t0,
	}
}

func create(t *testing.T, s store.Store, in *store.Task) *store.Task {
	t.Helper()
	got, created, err := s.TaskCreate(context.Background(), in)
	if err != nil || !created {
		t.Fatalf("TaskCreate(%s) = created %v, %v; want created", in.IdempotencyKey, created, err)
	}
	return got
}

// createN creates n tasks of tn with keys prefix-0…, due at t0.
func createN(t *testing.T, s store.Store, tn, prefix string, n int) []*store.Task {
	t.Helper()
	out := make([]*store.Task, n)
	for i := range out {
		out[i] = create(t, s, newTask(tn, fmt.Sprintf("%s-%d", prefix, i)))
	}
	return out
}

func get(t *testing.T, s store.Store, tn, id string) *store.Task {
	t.Helper()
	got, err := s.TaskGet(context.Background(), tn, id)
	if err != nil {
		t.Fatalf("TaskGet(%s) = %v", id, err)
	}
	return got
}

// claim claims up to limit tasks due at now with a 30 s lease.
func claim(t *testing.T, s store.Store, now time.Time, limit int, ids ...string) []*store.Task {
	t.Helper()
	got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: now, Lease: 30 * time.Second, Limit: limit, IDs: ids})
	if err != nil {
		t.Fatalf("TaskClaim() = %v", err)
	}
	return got
}

// claimOne claims exactly the task id.
func claimOne(t *testing.T, s store.Store, now time.Time, id string) *store.Task {
	t.Helper()
	got := claim(t, s, now, 1, id)
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("TaskClaim(IDs: %s) = %s, want that task", id, ids(got))
	}
	return got[0]
}

// finish finishes claimed task c as status at now, logging its attempt.
func finish(t *testing.T, s store.Store, c *store.Task, status store.Status, now time.Time) {
	t.Helper()
	errs, err := s.TaskFinish(context.Background(), []store.Finish{finishOf(c, status, now)})
	if err != nil || len(errs) != 1 || errs[0] != nil {
		t.Fatalf("TaskFinish(%s as %s) = %v, %v", c.ID, status, errs, err)
	}
}

func finishOf(c *store.Task, status store.Status, now time.Time) store.Finish {
	f := store.Finish{
		TaskID:  c.ID,
		Version: c.Version,
		Attempt: store.Attempt{
			AttemptNumber:  c.AttemptNumber,
			StartedAt:      now.Add(-250 * time.Millisecond),
			Duration:       250 * time.Millisecond,
			ResponseStatus: 503,
			ErrorMessage:   "status 503",
			ResponseBody:   "busy",
		},
		Status:     status,
		LastError:  "status 503",
		LastStatus: 503,
		Now:        now,
	}
	if status == store.Pending {
		f.NextAttemptAt = now.Add(time.Second)
		f.PrevDelay = time.Second
	}
	if status == store.Succeeded {
		f.Attempt.ResponseStatus, f.Attempt.ErrorMessage, f.LastError, f.LastStatus = 200, "", "", 200
	}
	return f
}

func ids(ts []*store.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

// checkRequest fails t unless got holds want's request, times at ms.
func checkRequest(t *testing.T, got, want *store.Task) {
	t.Helper()
	switch {
	case got.ID != want.ID && want.ID != "":
		t.Errorf("ID = %q, want %q", got.ID, want.ID)
	case got.Tenant != want.Tenant, got.IdempotencyKey != want.IdempotencyKey && want.IdempotencyKey != "",
		got.RequestHash != want.RequestHash, got.PolicyID != want.PolicyID:
		t.Errorf("identity = %q %q %q %q, want %q %q %q %q", got.Tenant, got.IdempotencyKey, got.RequestHash,
			got.PolicyID, want.Tenant, want.IdempotencyKey, want.RequestHash, want.PolicyID)
	}
	if got.TargetURL != want.TargetURL || got.Method != want.Method || got.BodyBinary != want.BodyBinary {
		t.Errorf("request = %s %s binary %v, want %s %s binary %v", got.Method, got.TargetURL, got.BodyBinary,
			want.Method, want.TargetURL, want.BodyBinary)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("body = %d bytes %.40q, want %d bytes %.40q", len(got.Body), got.Body, len(want.Body), want.Body)
	}
	if len(got.Headers) != len(want.Headers) || (len(want.Headers) > 0 && !maps.Equal(got.Headers, want.Headers)) {
		t.Errorf("headers = %v, want %v", got.Headers, want.Headers)
	}
	if !sameTime(got.CreatedAt, want.CreatedAt) && !want.CreatedAt.IsZero() {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
}

// wantErr fails t unless err is target (nil meaning success).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) { // errors.Is(nil, nil) is true
		t.Fatalf("%s error = %v, want %v", what, err, target)
	}
}
