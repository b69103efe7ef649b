package postgres_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// migrationRows returns the number and the highest version of schema's
// applied migrations.
func migrationRows(t *testing.T, schema string) (n, top int) {
	t.Helper()
	conn := pgtest.Admin(t)
	defer conn.Close(context.Background())
	err := conn.QueryRow(context.Background(), `SELECT count(*), coalesce(max(version), 0) FROM `+schema+
		`.retry_schema_migrations`).Scan(&n, &top)
	if err != nil {
		t.Fatalf("read migrations of %s: %v", schema, err)
	}
	return n, top
}

func tableExists(t *testing.T, schema, table string) bool {
	t.Helper()
	conn := pgtest.Admin(t)
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, schema+"."+table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	for i := range 2 {
		if err := postgres.Migrate(ctx, pgtest.URL(), postgres.WithSchema(schema)); err != nil {
			t.Fatalf("Migrate #%d = %v", i+1, err)
		}
	}
	open(t, schema).Close()
	want := postgres.SchemaVersion()
	if n, top := migrationRows(t, schema); want < 1 || n != want || top != want {
		t.Errorf("retry_schema_migrations has %d rows up to %d, want %d", n, top, want)
	}
}

func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), pgtest.URL(), postgres.WithSchema(schema))
			if err == nil {
				_, _, err = s.TaskCreate(context.Background(), &store.Task{Tenant: "t", TargetURL: "http://127.0.0.1:9/", Method: "GET"})
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d = %v", i, err)
		}
	}
	if got, top := migrationRows(t, schema); got != postgres.SchemaVersion() || top != postgres.SchemaVersion() {
		t.Errorf("after %d concurrent Opens retry_schema_migrations has %d rows up to %d, want %d", n, got, top,
			postgres.SchemaVersion())
	}
}

func TestFailedMigrationLeavesSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	first, err := os.ReadFile("migrations/001_init.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"migrations/001_init.up.sql": {Data: first},
		"migrations/002_bad.up.sql": {Data: []byte(`CREATE TABLE retry_extra (x integer);
			ALTER TABLE retry_tasks ADD COLUMN extra integer;
			SELECT 1 / 0;`)},
	}
	err = postgres.MigrateFS(ctx, pgtest.URL(), fsys, postgres.WithSchema(schema))
	if err == nil || !strings.Contains(err.Error(), "002_bad") {
		t.Fatalf("MigrateFS(with a failing 002) = %v, want its error", err)
	}
	if n, top := migrationRows(t, schema); n != 1 || top != 1 {
		t.Errorf("after the failure retry_schema_migrations has %d rows up to %d, want 1 and 1", n, top)
	}
	if tableExists(t, schema, "retry_extra") {
		t.Errorf("the failed migration's table is there")
	}
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	var cols int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'retry_tasks' AND column_name = 'extra'`, schema).Scan(&cols); err != nil || cols != 0 {
		t.Errorf("the failed migration's column: count %d, %v; want none", cols, err)
	}
	// The schema is 001's, whole: the store opens and works.
	s := open(t, schema)
	if _, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "t", TargetURL: "http://127.0.0.1:9/", Method: "GET"}); err != nil {
		t.Errorf("TaskCreate after the failed migration = %v", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("newer schema", func(t *testing.T) {
		t.Parallel()
		schema := newSchema(t)
		open(t, schema).Close()
		conn := pgtest.Admin(t)
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `INSERT INTO `+schema+`.retry_schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
			t.Fatal(err)
		}
		if s, err := postgres.Open(ctx, pgtest.URL(), postgres.WithSchema(schema)); err == nil || !strings.Contains(err.Error(), "newer") {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(newer schema) = %v, want a refusal", err)
		}
	})
	t.Run("missing schema", func(t *testing.T) {
		t.Parallel()
		pgtest.Admin(t).Close(ctx)
		if s, err := postgres.Open(ctx, pgtest.URL(), postgres.WithSchema("retrykit_test_no_such_schema")); err == nil {
			s.Close()
			t.Errorf("Open(missing schema) succeeded")
		}
	})
	t.Run("bad URL", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{"postgres://[::1", "mysql://x", "host=127.0.0.1 port=notaport"} {
			if _, err := postgres.Open(ctx, url); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Open(%q) = %v, want ErrInvalid", url, err)
			}
		}
	})
}
