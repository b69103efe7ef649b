package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
	"github.com/retrykit/retry/service/store/storetest"
)

// open opens a store in a new file of t's temporary directory.
func open(t testing.TB, opts ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "retryd.db")
	s, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	return s, path
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := open(t)
		return s
	})
}

func TestConformanceShared(t *testing.T) {
	t.Parallel()
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		first, path := open(t)
		second, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		return first, second
	})
}

// One process owns a SQLite store, so it has no change feed: storetest
// skips its Feed tests, and retryd runs no feed for it.
func TestNotAFeed(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	defer s.Close()
	if _, ok := any(s).(store.Feed); ok {
		t.Errorf("%T is a store.Feed", s)
	}
}
