package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

var purgeT0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// endTask creates a task of key and finishes it as status at purgeT0.
func endTask(t *testing.T, s *redis.Store, key, hash string, status store.Status) *store.Task {
	t.Helper()
	ctx := context.Background()
	tk, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: key, RequestHash: hash,
		TargetURL: "http://127.0.0.1:9/", Method: "POST", PolicyID: key, BodyRef: "s3://b/" + key, BodySize: 1,
		CreatedAt: purgeT0, NextAttemptAt: purgeT0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.TaskClaim(ctx, store.ClaimParams{Now: purgeT0, Lease: time.Minute, IDs: []string{tk.ID}})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim = %v, %v", c, err)
	}
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: tk.ID, Version: c[0].Version, Status: status, Now: purgeT0}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish = %v, %v", errs, err)
	}
	return tk
}

// TestPurgeBackfill: a store whose terminal tasks predate the done sets
// purges them all the same.
func TestPurgeBackfill(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithPartitions(4)))
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		endTask(t, s, k, "h", store.Succeeded)
	}
	if err := redis.ForgetDoneIndex(ctx, s); err != nil {
		t.Fatal(err)
	}
	refs, n, err := s.TaskPurge(ctx, purgeT0.Add(time.Second), 0)
	if err != nil || n != 5 || len(refs) != 5 {
		t.Fatalf("TaskPurge = %q, %d, %v; want 5 tasks and refs", refs, n, err)
	}
	counts, err := s.TaskCounts(ctx)
	if err != nil || counts[store.Succeeded] != 0 {
		t.Errorf("TaskCounts = %v, %v; want no SUCCEEDED task", counts, err)
	}
}

// TestPurgeCutShort: records a purge did not release (its process died)
// are released by the next purge, which frees the keys.
func TestPurgeCutShort(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url)))
	ctx := context.Background()
	tk := endTask(t, s, "k", "first", store.Failed)
	if n, err := redis.PurgeCutShort(ctx, s, purgeT0.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("PurgeCutShort = %d, %v; want 1", n, err)
	}
	if _, err := s.TaskGet(ctx, "t", tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TaskGet(purged) = %v, want ErrNotFound", err)
	}
	if left, err := redis.PurgedLeft(ctx, s); err != nil || left != 1 {
		t.Fatalf("purged list holds %d entries, %v; want 1", left, err)
	}
	if used, err := s.BodyRefsInUse(ctx, []string{"s3://b/k"}); err != nil || len(used) != 0 {
		t.Errorf("BodyRefsInUse = %v, %v; want none", used, err)
	}
	// The key's record still names the purged task: another request under
	// it is refused until a purge releases it.
	other := &store.Task{Tenant: "t", IdempotencyKey: "k", RequestHash: "second", PolicyID: "k"}
	if _, _, err := s.TaskCreate(ctx, other); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("TaskCreate(other request) before the release = %v, want ErrConflict", err)
	}
	if _, n, err := s.TaskPurge(ctx, purgeT0, 0); err != nil || n != 0 {
		t.Fatalf("TaskPurge = %d, %v", n, err)
	}
	if left, err := redis.PurgedLeft(ctx, s); err != nil || left != 0 {
		t.Errorf("purged list holds %d entries after a purge, %v; want 0", left, err)
	}
	got, created, err := s.TaskCreate(ctx, other)
	if err != nil || !created || got.ID == tk.ID {
		t.Fatalf("TaskCreate(other request) after the release = %v, created %v, %v; want a new task", got, created, err)
	}
	if got := getTask(t, s, got.ID); got.RequestHash != "second" {
		t.Errorf("new task's hash = %q", got.RequestHash)
	}
}

func getTask(t *testing.T, s *redis.Store, id string) *store.Task {
	t.Helper()
	got, err := s.TaskGet(context.Background(), "t", id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
