// Package redistest gives tests the Redis server this repository tests
// against: RETRYKIT_REDIS_URL, by default redis://127.0.0.1:6379/0, as
// .ci/servers starts it, and a key prefix of each test's own on it.
package redistest

import (
	"context"
	"fmt"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/servertest"
	"github.com/retrykit/retry/service/store"
)

// URL returns the URL of the shared test server. Without an answer from
// it, t is skipped, or fails in CI (servertest.Missing).
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("RETRYKIT_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	c := Client(t, url)
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		servertest.Missing(t, fmt.Sprintf("no Redis at %s (%v): start one with "+
			"`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no`, "+
			"or point RETRYKIT_REDIS_URL at one", url, err))
	}
	return url
}

// Client returns a client of the server at url, for what a test does
// beside the store; the caller closes it. A url go-redis cannot parse fails
// t.
func Client(t testing.TB, url string) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis URL %q: %v", url, err)
	}
	return goredis.NewClient(opts)
}

// Prefix returns a key prefix of t's own on the server at url, whose
// keys are deleted (SCAN and UNLINK, never a FLUSH) when t ends.
func Prefix(t testing.TB, url string) string {
	t.Helper()
	prefix := "retrykit-test:" + store.NewID()[24:] + ":" // the random end
	t.Cleanup(func() {
		c := Client(t, url)
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
