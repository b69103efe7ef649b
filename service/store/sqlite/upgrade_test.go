package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// TestUpgradeFromSchema1: a file written before body references (schema
// 1) opens, its tasks read with their inline body's size, and the
// retention sweep finds its terminal tasks.
func TestUpgradeFromSchema1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	schema, err := os.ReadFile("migrations/001_init.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ended := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	for _, q := range []string{string(schema),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 'init', 0)`,
		`INSERT INTO tasks (seq, id, tenant, idempotency_key, request_hash, policy_id, state, status, wake_at,
			attempt_number, next_attempt_at, prev_delay_ns, budget_start, last_error, last_status, lease_until,
			claimed_at, version, log_count, created_at, updated_at, finished_at) VALUES
			(1, 'old-done', 't', 'k1', 'h', 'p', 'SUCCEEDED', 'SUCCEEDED', 0, 1, ?1, 0, ?1, '', 200, 0, ?1, 3, 1, ?1, ?1, ?1),
			(2, 'old-live', 't', 'k2', 'h', 'p', 'LIVE', 'PENDING', ?1, 0, ?1, 0, ?1, '', 0, 0, 0, 1, 0, ?1, ?1, 0)`,
		`INSERT INTO task_payloads VALUES (1, 'http://x/', 'POST', '{}', X'00010203', 1), (2, 'http://x/', 'POST', '{}', 'hello', 0)`,
		`INSERT INTO attempts VALUES (1, 0, 1, ?1, 1000, 200, '', 'ok')`,
		`UPDATE task_counts SET n = 1 WHERE status IN ('SUCCEEDED', 'PENDING')`,
	} {
		if _, err := db.Exec(q, ended); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(schema 1) = %v", err)
	}
	defer s.Close()
	for id, size := range map[string]int64{"old-done": 4, "old-live": 5} {
		got, err := s.TaskGet(ctx, "t", id)
		if err != nil || got.BodyRef != "" || got.BodySize != size {
			t.Errorf("TaskGet(%s) = %+v, %v; want no ref, size %d", id, got, err, size)
		}
	}
	refs, n, err := s.TaskPurge(ctx, time.UnixMilli(ended+1), 0)
	if err != nil || n != 1 || len(refs) != 0 {
		t.Fatalf("TaskPurge = %q, %d, %v; want the terminal task", refs, n, err)
	}
	if _, err := s.TaskGet(ctx, "t", "old-done"); err == nil {
		t.Error("the purged task is still there")
	}
	counts, err := s.TaskCounts(ctx)
	if err != nil || counts[store.Succeeded] != 0 || counts[store.Pending] != 1 {
		t.Errorf("TaskCounts = %v, %v", counts, err)
	}
	// The tenant counts, which schema 3 brought, count the tasks stored
	// before it.
	tcounts, err := s.TenantCounts(ctx, "t")
	if err != nil || tcounts[store.Succeeded] != 0 || tcounts[store.Pending] != 1 || len(tcounts) != 6 {
		t.Errorf("TenantCounts = %v, %v", tcounts, err)
	}
}
