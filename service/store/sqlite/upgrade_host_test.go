package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
	"github.com/retrykit/retry/service/store/storetest"
)

// TestUpgradeTargetHost: tasks stored before schema 4 are found by the
// host of their target.
func TestUpgradeTargetHost(t *testing.T) {
	t.Parallel()
	upgradeURLs := storetest.TargetHostCases()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	qs := []string{`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`}
	for v, name := range []string{"001_init", "002_body_ref", "003_tenant_counts"} {
		b, err := os.ReadFile("migrations/" + name + ".up.sql")
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, string(b), fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, '%s', 0)`, v+1, name[4:]))
	}
	seq := 0
	for u := range upgradeURLs {
		seq++
		qs = append(qs, fmt.Sprintf(`INSERT INTO tasks (seq, id, tenant, idempotency_key, request_hash, policy_id,
			state, status, wake_at, attempt_number, next_attempt_at, prev_delay_ns, budget_start, last_error,
			last_status, lease_until, claimed_at, version, log_count, created_at, updated_at, finished_at) VALUES
			(%d, 'id-%d', 't', 'k%d', 'h', 'p', 'LIVE', 'PENDING', 1, 0, 1, 0, 1, '', 0, 0, 0, 1, 0, 1, 1, 0)`,
			seq, seq, seq),
			fmt.Sprintf(`INSERT INTO task_payloads (task_seq, target_url, method, headers, body, body_binary)
			VALUES (%d, '%s', 'POST', '{}', '', 0)`, seq, u))
	}
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	db.Close()

	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(schema 3) = %v", err)
	}
	defer s.Close()
	want := map[string][]string{}
	for u, host := range upgradeURLs {
		want[host] = append(want[host], u)
	}
	for host, urls := range want {
		items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "t", TargetHost: host}, store.Page{})
		if err != nil || len(items) != len(urls) {
			t.Errorf("TaskList(%s) = %d tasks, %v; want those of %q", host, len(items), err, urls)
		}
	}
}
