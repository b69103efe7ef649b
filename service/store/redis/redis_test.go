package redis_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/storetest"
)

// sharedURL returns the URL of the shared Redis server the tests use
// (RETRYKIT_REDIS_URL, by default redis://127.0.0.1:6379/0). Without an
// answer from it, t is skipped, or fails when RETRYKIT_REQUIRE_SERVERS=1.
func sharedURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("RETRYKIT_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("RETRYKIT_REDIS_URL=%q: %v", url, err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		unavailable(t, fmt.Sprintf("no Redis at %s (%v): start one with "+
			"`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no`, "+
			"or point RETRYKIT_REDIS_URL at one", url, err))
	}
	return url
}

// unavailable skips t for want of a server, or fails it in CI.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg + " (RETRYKIT_REQUIRE_SERVERS=1)")
	}
	t.Skip(msg)
}

// newPrefix returns a key prefix of t's own on the server at url, whose
// keys are deleted (SCAN and UNLINK, never a FLUSH) when t ends.
func newPrefix(t testing.TB, url string) string {
	t.Helper()
	prefix := "retrykit-test:" + store.NewID()[24:] + ":" // the random end
	t.Cleanup(func() {
		opts, err := goredis.ParseURL(url)
		if err != nil {
			t.Error(err)
			return
		}
		c := goredis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		var batch []string
		flush := func() {
			if len(batch) > 0 {
				if err := c.Unlink(ctx, batch...).Err(); err != nil {
					t.Errorf("cleaning up %s: %v", prefix, err)
				}
				batch = batch[:0]
			}
		}
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 500 {
				flush()
			}
		}
		flush()
		if err := iter.Err(); err != nil {
			t.Errorf("cleaning up %s: %v", prefix, err)
		}
	})
	return prefix
}

var quiet = slog.New(slog.DiscardHandler)

// open opens a store under prefix on the server at url, failing t if it
// cannot.
func open(t testing.TB, url, prefix string, opts ...redis.Option) *redis.Store {
	t.Helper()
	s, err := redis.Open(context.Background(), url, append([]redis.Option{redis.WithPrefix(prefix), redis.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s, prefix %s) = %v", url, prefix, err)
	}
	return s
}

// closeAtEnd closes s when t ends.
func closeAtEnd(t testing.TB, s *redis.Store) *redis.Store {
	t.Cleanup(func() { s.Close() })
	return s
}

// conformance runs the store conformance suites against the server at url,
// every store under a prefix of its own below base, checking the keys of
// every script the stores run.
func conformance(t *testing.T, url, base string) {
	var n atomic.Int64
	sub := func() string { return fmt.Sprintf("%s%d:", base, n.Add(1)) }
	checker := newSlotChecker(t)
	t.Run("Run", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			return checker.watch(open(t, url, sub()))
		})
	})
	t.Run("RunShared", func(t *testing.T) {
		storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
			prefix := sub()
			return checker.watch(open(t, url, prefix)), checker.watch(open(t, url, prefix))
		})
	})
	checker.verify(t)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	url := sharedURL(t)
	conformance(t, url, newPrefix(t, url))
}
