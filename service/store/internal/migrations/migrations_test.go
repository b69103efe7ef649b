package migrations_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/retrykit/retry/service/store/internal/migrations"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/002_more.up.sql": {Data: []byte("two")},
		"migrations/001_init.up.sql": {Data: []byte("one")},
		"migrations/README":          {Data: []byte("not a migration")},
	}
	ms, err := migrations.Load(fsys)
	if err != nil || len(ms) != 2 || ms[0].String() != "001_init" || ms[1].SQL != "two" {
		t.Fatalf("Load = %v, %v; want 001_init and 002_more in order", ms, err)
	}
	if v := migrations.Version(fsys); v != 2 {
		t.Errorf("Version = %d, want 2", v)
	}
	if rest, err := migrations.Pending(ms, 1); err != nil || len(rest) != 1 || rest[0].Version != 2 {
		t.Errorf("Pending(at 1) = %v, %v; want 002", rest, err)
	}
	if _, err := migrations.Pending(ms, 3); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Pending(at 3) = %v, want a refusal", err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"a gap":     {"migrations/001_a.up.sql": {}, "migrations/003_c.up.sql": {}},
		"no number": {"migrations/init.up.sql": {}},
		"zero":      {"migrations/000_init.up.sql": {}},
	} {
		if ms, err := migrations.Load(fsys); err == nil {
			t.Errorf("Load(%s) = %v, want an error", name, ms)
		}
	}
}
