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
	"github.com/retrykit/retry/service/store/storetest"
)

// TestUpgradeTargetHost: tasks stored before schema 4 are found by the
// host of their target.
func TestUpgradeTargetHost(t *testing.T) {
	t.Parallel()
	upgradeURLs := storetest.TargetHostCases()
	ctx := context.Background()
	schema := newSchema(t)
	fs3 := fstest.MapFS{}
	for _, name := range []string{"001_init", "002_body_ref", "003_tenant_counts"} {
		b, err := os.ReadFile("migrations/" + name + ".up.sql")
		if err != nil {
			t.Fatal(err)
		}
		fs3["migrations/"+name+".up.sql"] = &fstest.MapFile{Data: b}
	}
	if err := postgres.MigrateFS(ctx, pgtest.URL(), fs3, postgres.WithSchema(schema)); err != nil {
		t.Fatalf("migrate to schema 3: %v", err)
	}
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for u := range upgradeURLs {
		var seq int64
		if err := conn.QueryRow(ctx, `INSERT INTO `+schema+`.retry_tasks (created_at, body_binary, id, tenant,
			idempotency_key, request_hash, policy_id, state, method, target_url, headers, body)
			VALUES ($1, false, $2, 't', $2, 'h', 'p', 'LIVE', 'POST', $2, '{}', '') RETURNING seq`, at, u).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO `+schema+`.retry_runs (task_seq, version, wake_at, next_attempt_at,
			budget_start, updated_at, prev_delay_ns, attempt_number, last_status, status, last_error)
			VALUES ($1, 1, $2, $2, $2, $2, 0, 0, 0, 'PENDING', '')`, seq, at); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, schema)
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
