package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

func TestMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Opening again applies nothing twice.
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("second Open = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, top int
	var mode string
	if err := db.QueryRow(`SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if want := sqlite.SchemaVersion(); want < 1 || n != want || top != want {
		t.Errorf("schema_migrations has %d rows up to %d, want %d", n, top, want)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	// A file from a newer program is refused rather than misread.
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(ctx, path); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(newer schema) = %v, want a refusal", err)
	}
}

func TestOpenRefusesMemory(t *testing.T) {
	t.Parallel()
	for _, path := range []string{":memory:", "", "file::memory:?cache=shared", "sqlite://:memory:"} {
		if _, err := sqlite.Open(context.Background(), path); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", path, err)
		}
	}
}

func TestOpenOddPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a dir?#%", "retry d.db")
	if _, err := sqlite.Open(context.Background(), path); err == nil {
		t.Fatalf("Open in a missing directory succeeded")
	}
	path = filepath.Join(t.TempDir(), "odd ?#% name.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.WithReadConns(2), sqlite.WithBusyTimeout(0))
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	defer s.Close()
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping = %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the file is not where asked: %v", err)
	}
}
