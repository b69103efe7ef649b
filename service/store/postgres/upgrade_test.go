package postgres_test

import (
	"context"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// TestUpgradeFromSchema1: a database written before body references
// (schema 1) migrates, its tasks read with their inline body's size, and
// the retention sweep finds its terminal tasks.
func TestUpgradeFromSchema1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	init, err := os.ReadFile("migrations/001_init.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	fs1 := fstest.MapFS{"migrations/001_init.up.sql": {Data: init}}
	if err := postgres.MigrateFS(ctx, pgtest.URL(), fs1, postgres.WithSchema(schema)); err != nil {
		t.Fatalf("migrate to schema 1: %v", err)
	}
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	ended := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO ` + schema + `.retry_tasks (seq, created_at, body_binary, id, tenant, idempotency_key, request_hash,
			policy_id, state, method, target_url, headers, body) OVERRIDING SYSTEM VALUE VALUES
			(1, $1, true, 'old-done', 't', 'k1', 'h', 'p', 'SUCCEEDED', 'POST', 'http://x/', '{}', '\x00010203'),
			(2, $1, false, 'old-live', 't', 'k2', 'h', 'p', 'LIVE', 'POST', 'http://x/', '{}', 'hello')`,
		`INSERT INTO ` + schema + `.retry_runs (task_seq, version, wake_at, next_attempt_at, budget_start, updated_at,
			finished_at, prev_delay_ns, attempt_number, last_status, status, last_error) VALUES
			(1, 3, NULL, $1, $1, $1, $1, 0, 1, 200, 'SUCCEEDED', ''),
			(2, 1, $1, $1, $1, $1, NULL, 0, 0, 0, 'PENDING', '')`,
		`INSERT INTO ` + schema + `.retry_attempts (task_seq, started_at, duration_ns, attempt_number, response_status,
			error_message, response_body) VALUES (1, $1, 1000, 1, 200, '', 'ok')`,
		`UPDATE ` + schema + `.retry_counts SET succeeded = 1, pending = 1 WHERE shard = 0 OR $1::timestamptz IS NULL`,
	} {
		if _, err := conn.Exec(ctx, q, ended); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	s := open(t, schema)
	defer s.Close()
	for id, size := range map[string]int64{"old-done": 4, "old-live": 5} {
		got, err := s.TaskGet(ctx, "t", id)
		if err != nil || got.BodyRef != "" || got.BodySize != size {
			t.Errorf("TaskGet(%s) = %+v, %v; want no ref, size %d", id, got, err, size)
		}
	}
	refs, n, err := s.TaskPurge(ctx, ended.Add(time.Millisecond), 0)
	if err != nil || n != 1 || len(refs) != 0 {
		t.Fatalf("TaskPurge = %q, %d, %v; want the terminal task", refs, n, err)
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
	var logs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.retry_attempts`).Scan(&logs); err != nil || logs != 0 {
		t.Errorf("%d attempts left, %v; want none", logs, err)
	}
}
