package sqlite_test

import (
	"context"
	"database/sql"
	"maps"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// The stored format does not change under the store: rows written as an
// earlier retryd wrote them (times in epoch ms, headers a JSON object, the
// state column LIVE or the terminal status) read back, and what the store
// writes has that form.
func TestStoredFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const at = 1955001234567 // 2031-12-13T…Z in epoch ms
	for _, q := range []string{
		`INSERT INTO policies (tenant, id, spec, created_at) VALUES ('acme', 'p', '{"maxAttempts":3}', 1955001234567)`,
		`INSERT INTO tasks (seq, id, tenant, idempotency_key, request_hash, policy_id, state, status, wake_at,
			attempt_number, next_attempt_at, prev_delay_ns, budget_start, last_error, last_status, lease_until,
			claimed_at, version, log_count, created_at, updated_at, finished_at) VALUES
			(1, 'old-live', 'acme', 'k1', 'h1', 'p', 'LIVE', 'PENDING', 1955001234567, 0, 1955001234567, 0,
				1955001234567, '', 0, 0, 0, 1, 0, 1955001234000, 1955001234000, 0),
			(2, 'old-dead', 'acme', 'k2', 'h2', 'p', 'FAILED', 'FAILED', 0, 2, 1955001234567, 1000000000,
				1955001234567, 'status 400', 400, 0, 0, 5, 2, 1955001234000, 1955001239000, 1955001239000)`,
		`INSERT INTO task_payloads (task_seq, target_url, method, headers, body, body_binary) VALUES
			(1, 'http://127.0.0.1:9/a', 'POST', '{"Content-Type":"application/json","X-A":"b"}', '{}', 0),
			(2, 'http://127.0.0.1:9/b', 'GET', '{}', '', 0)`,
		`UPDATE task_counts SET n = 1 WHERE status IN ('PENDING', 'FAILED')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	due := time.UnixMilli(at).UTC()
	p, err := s.PolicyGet(ctx, "acme", "p")
	if err != nil || string(p.Spec) != `{"maxAttempts":3}` || !p.CreatedAt.Equal(due) {
		t.Errorf("PolicyGet = %+v, %v", p, err)
	}
	live, err := s.TaskGet(ctx, "acme", "old-live")
	if err != nil || live.Status != store.Pending || !live.NextAttemptAt.Equal(due) || live.Version != 1 ||
		!maps.Equal(live.Headers, map[string]string{"Content-Type": "application/json", "X-A": "b"}) {
		t.Errorf("TaskGet(old-live) = %+v, %v", live, err)
	}
	dead, err := s.TaskGet(ctx, "acme", "old-dead")
	if err != nil || dead.Status != store.Failed || dead.Headers != nil || dead.PrevDelay != time.Second ||
		!dead.FinishedAt.Equal(time.UnixMilli(1955001239000).UTC()) {
		t.Errorf("TaskGet(old-dead) = %+v, %v", dead, err)
	}
	dl, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "acme", Statuses: []store.Status{store.Failed}}, store.Page{})
	if err != nil || len(dl) != 1 || dl[0].ID != "old-dead" {
		t.Errorf("dead letters = %d tasks, %v; want old-dead", len(dl), err)
	}
	var heard []store.Due
	if err := s.TaskDue(ctx, func(d store.Due) { heard = append(heard, d) }); err != nil || len(heard) != 1 ||
		heard[0].ID != "old-live" || !heard[0].At.Equal(due) {
		t.Errorf("TaskDue = %v, %v; want old-live at %v", heard, err, due)
	}
	if n, err := s.TaskCounts(ctx); err != nil || n[store.Pending] != 1 || n[store.Failed] != 1 {
		t.Errorf("TaskCounts = %v, %v", n, err)
	}

	created, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "acme", IdempotencyKey: "new", TargetURL: "http://127.0.0.1:9/",
		Method: "POST", Headers: map[string]string{"X-B": "c"}, NextAttemptAt: due.Add(1500 * time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	var state, headers string
	var next int64
	if err := db.QueryRowContext(ctx, `SELECT t.state, t.next_attempt_at, p.headers FROM tasks t
		JOIN task_payloads p ON p.task_seq = t.seq WHERE t.id = ?`, created.ID).Scan(&state, &next, &headers); err != nil {
		t.Fatal(err)
	}
	if state != "LIVE" || next != at+1 || headers != `{"X-B":"c"}` {
		t.Errorf("stored state %q, next_attempt_at %d, headers %q; want LIVE, %d, {\"X-B\":\"c\"}", state, next, headers, at+1)
	}
}
