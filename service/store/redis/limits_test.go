package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/destination/limits/limitstest"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// TestLimitKeysExpire: a key's rate hash and slots set live until a while
// (limits.Idle) after the last moment their state matters, and a release
// of a slot that expired with its set is no error.
func TestLimitKeysExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	s := closeAtEnd(t, open(t, url, prefix))
	c := redistest.Client(t, url)
	defer c.Close()
	t0 := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	p := store.LimitParams{Key: "t/d", Now: t0, PerSecond: 0.5, Burst: 1, MaxInFlight: 1, Hold: 10 * time.Second}
	g, err := s.LimitAcquire(ctx, p)
	if err != nil || !g.OK {
		t.Fatalf("LimitAcquire = %+v, %v", g, err)
	}
	if g, err := s.LimitAcquire(ctx, p); err != nil || g.Reason != store.LimitRate {
		t.Fatalf("the second LimitAcquire = %+v, %v; want refused by the rate", g, err)
	}
	keys, err := c.Keys(ctx, prefix+"{l:*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys = %q, %v; want the rate hash and the slots", keys, err)
	}
	for _, k := range keys {
		// The ticket is 4s ahead (two intervals), the slot's expiry 10s.
		want := 4 * time.Second
		if strings.Contains(k, "}:slots:") {
			want = 10 * time.Second
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl > want+limits.Idle || ttl < want+limits.Idle-5*time.Second {
			t.Errorf("PTTL(%s) = %v, %v; want about %v", k, ttl, err, want+limits.Idle)
		}
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.LimitRelease(ctx, p.Key, g.Slot); err != nil {
		t.Errorf("LimitRelease of an expired set = %v", err)
	}
}

func BenchmarkLimits(b *testing.B) {
	url := redistest.URL(b)
	limitstest.Bench(b, closeAtEnd(b, open(b, url, redistest.Prefix(b, url))))
}
