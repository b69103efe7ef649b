// Package pgtest gives tests the PostgreSQL server this repository tests
// against: RETRYKIT_POSTGRES_URL, by default DefaultURL, as .ci/servers
// starts it, and a schema of each test's own on it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/servertest"
)

// DefaultURL is the server .ci/servers starts: trust authentication on
// loopback, database test.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test server's URL: RETRYKIT_POSTGRES_URL, or DefaultURL.
// It does not check that the server answers; Admin and Schema do.
func URL() string {
	if u := os.Getenv("RETRYKIT_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Admin connects to the test server for statements a test runs beside the
// store (the caller closes the connection). Without an answer, t is
// skipped, or fails in CI (servertest.Missing).
func Admin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		servertest.Missing(t, fmt.Sprintf("PostgreSQL is not reachable at %s (%v): start it (bash .ci/servers, "+
			"or pg_ctlcluster <version> main start) or set RETRYKIT_POSTGRES_URL", URL(), err))
	}
	return conn
}

// Schema creates a schema of t's own, named prefix and random digits, and
// drops it when t ends. The drop waits up to 30 seconds for the server,
// which a test may have restarted.
func Schema(t testing.TB, prefix string) string {
	t.Helper()
	conn := Admin(t)
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for ctx.Err() == nil {
			var conn *pgx.Conn
			if conn, err = pgx.Connect(ctx, URL()); err == nil {
				_, err = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
				conn.Close(ctx)
				if err == nil {
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("drop schema %s: %v", name, err)
	})
	return name
}
