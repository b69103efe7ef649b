package postgres_test

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
	"github.com/retrykit/retry/service/store/storetest"
)

// defaultURL is the test server's address unless RETRYKIT_POSTGRES_URL
// names another.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func serverURL() string {
	if u := os.Getenv("RETRYKIT_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultURL
}

// admin connects to the test server, skipping t when there is none (failing
// it instead under RETRYKIT_REQUIRE_SERVERS=1, as CI runs).
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL())
	if err != nil {
		msg := "PostgreSQL is not reachable at " + serverURL() + " (" + err.Error() + "): start it " +
			"(pg_ctlcluster <version> main start, or .ci/servers) or set RETRYKIT_POSTGRES_URL"
		if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return conn
}

// newSchema creates a schema of t's own, dropped when t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	conn := admin(t)
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "retrykit_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn := admin(t)
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// open opens a store in schema, closed when t ends.
func open(t testing.TB, schema string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), serverURL(), append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(schema %s) = %v", schema, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, newSchema(t))
	})
}

func TestConformanceShared(t *testing.T) {
	t.Parallel()
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		schema := newSchema(t)
		return open(t, schema), open(t, schema)
	})
}
