package postgres_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
	"github.com/retrykit/retry/service/store/storetest"
)

// newSchema creates a schema of t's own on the test server, dropped when t
// ends.
func newSchema(t testing.TB) string {
	t.Helper()
	return pgtest.Schema(t, "retrykit_test_")
}

// open opens a store in schema, closed when t ends.
func open(t testing.TB, schema string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.URL(), append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
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
