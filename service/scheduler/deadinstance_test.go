package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// TestClaimsOfAnInstanceTakenForDead: a Redis outage longer than the
// heartbeat's grace makes the other instances take this one for dead, and
// it goes on claiming as before, unaware, until it learns it. Its
// attempts are then refused before they are sent (SendHorizon); they must
// cost nothing, and the store joins again as a new instance at once, so
// the task goes out with the next claim. Charged, each refused claim
// counted an attempt and the task ran out of attempts without a call.
func TestClaimsOfAnInstanceTakenForDead(t *testing.T) {
	t.Parallel()
	a, b := openRedisPair(t)
	ctx := context.Background()
	if _, err := a.Join(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	// b, ten seconds on, finds a's beat old: a is dead.
	later := time.Now().Add(10 * time.Second)
	if err := b.Beat(ctx, later, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReclaimDead(ctx, later, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	tg := newTarget(t, 200)
	putPolicy(t, a, "p", fast(3))
	task := addTask(t, a, tg.URL+"/hook", "p")
	start(t, a, options{cfg: schedulerConfig(50 * time.Millisecond)})
	got := waitFor(t, a, task.ID, terminal)
	if got.Status != store.Succeeded || got.AttemptNumber != 1 || len(tg.seen()) != 1 {
		t.Fatalf("task %s after %d attempts (%q), target saw %d requests; want SUCCEEDED on the first, one request",
			got.Status, got.AttemptNumber, got.LastError, len(tg.seen()))
	}
	if n := len(attempts(t, a, task.ID)); n != 1 {
		t.Errorf("the attempt log has %d entries, want the one sent", n)
	}
}

// openRedisPair opens two Stores on one key prefix of the test Redis
// (package redistest), as two instances would.
func openRedisPair(t *testing.T) (*redis.Store, *redis.Store) {
	t.Helper()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	open := func() *redis.Store {
		st, err := redis.Open(context.Background(), url, redis.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	return open(), open()
}
