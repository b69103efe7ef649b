package redis_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry/service/destination/limits/limitstest"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
	"github.com/retrykit/retry/service/store/storetest"
)

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
	checker := newSlotChecker(t, strings.HasPrefix(url, "redis+cluster://"))
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
	// The limits of destinations, whose script the checker watches too.
	t.Run("Limits", func(t *testing.T) {
		limitstest.Run(t, func(t *testing.T) store.Limits {
			return checker.watch(closeAtEnd(t, open(t, url, sub())))
		})
		limitstest.RunShared(t, func(t *testing.T) (store.Limits, store.Limits) {
			prefix := sub()
			return checker.watch(closeAtEnd(t, open(t, url, prefix))), checker.watch(closeAtEnd(t, open(t, url, prefix)))
		})
	})
	checker.verify(t)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	conformance(t, url, redistest.Prefix(t, url))
}
