package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
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

// openBackend opens a store of the test servers, of t's own (a schema, a
// key prefix) and removed when t ends: PostgreSQL at RETRYKIT_POSTGRES_URL
// or postgres://postgres@127.0.0.1:5432/test, Redis at RETRYKIT_REDIS_URL
// or redis://127.0.0.1:6379/0. Without the server t is skipped, or fails
// under RETRYKIT_REQUIRE_SERVERS=1.
func openBackend(t testing.TB, backend string) store.Store {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	switch backend {
	case "postgres":
		url := cmpEnv("RETRYKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		admin := func() *pgx.Conn {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			conn, err := pgx.Connect(cctx, url)
			if err != nil {
				unavailable(t, "PostgreSQL is not reachable at "+url+": "+err.Error())
			}
			return conn
		}
		schema := "retrykit_api_" + suffix
		conn := admin()
		_, err := conn.Exec(ctx, "CREATE SCHEMA "+schema)
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("create schema: %v", err)
		}
		t.Cleanup(func() {
			conn := admin()
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
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

func cmpEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// unavailable skips t for want of a server, or fails it in CI.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg + " (RETRYKIT_REQUIRE_SERVERS=1)")
	}
	t.Skip(msg)
}
