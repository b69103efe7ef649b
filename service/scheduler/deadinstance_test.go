package scheduler_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
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
// (RETRYKIT_REDIS_URL or redis://127.0.0.1:6379/0), as two instances
// would, and deletes the prefix's keys when t ends. Without a server the
// test is skipped, or fails under RETRYKIT_REQUIRE_SERVERS=1.
func openRedisPair(t *testing.T) (*redis.Store, *redis.Store) {
	t.Helper()
	url := os.Getenv("RETRYKIT_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("RETRYKIT_REDIS_URL=%q: %v", url, err)
	}
	if c, err := net.DialTimeout("tcp", opts.Addr, time.Second); err != nil {
		if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
			t.Fatalf("no Redis at %s (RETRYKIT_REQUIRE_SERVERS=1): %v", opts.Addr, err)
		}
		t.Skipf("no Redis at %s: %v", opts.Addr, err)
	} else {
		c.Close()
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	prefix := "retrykit-sched-" + hex.EncodeToString(r[:]) + ":"
	open := func() *redis.Store {
		st, err := redis.Open(context.Background(), url, redis.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	t.Cleanup(func() {
		rdb := goredis.NewClient(opts)
		defer rdb.Close()
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})
	return a, b
}
