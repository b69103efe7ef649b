package api_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// backends are the stores the tests of filters and bulk changes run on:
// each answers lists and filters in its own code.
var backends = []string{"sqlite", "postgres", "redis"}

// eachBackend runs f as a parallel subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// openBackend opens a store of the test servers (pgtest, redistest), of
// t's own (a schema, a key prefix) and removed when t ends. Without the
// server t is skipped, or fails in CI (servertest.Missing).
func openBackend(t testing.TB, backend string) store.Store {
	t.Helper()
	ctx := context.Background()
	switch backend {
	case "postgres":
		url, schema := pgtest.URL(), pgtest.Schema(t, "retrykit_api_")
		st, err := postgres.Open(ctx, url, postgres.WithSchema(schema))
		if err != nil {
			t.Fatalf("postgres.Open: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	case "redis":
		url := redistest.URL(t)
		st, err := redis.Open(ctx, url, redis.WithPrefix(redistest.Prefix(t, url)))
		if err != nil {
			t.Fatalf("redis.Open: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	t.Fatalf("unknown backend %q", backend)
	return nil
}
