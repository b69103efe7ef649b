package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
)

// attemptListSQL reads a page of a task's attempt log and tells a task
// without attempts (one row of NULLs) from no task (no row), in one
// statement.
const attemptListSQL = `SELECT a.id, a.attempt_number, a.started_at, a.duration_ns, a.response_status,
	a.error_message, a.response_body
	FROM retry_tasks t LEFT JOIN LATERAL (
		SELECT * FROM retry_attempts a WHERE a.task_seq = t.seq AND a.id > $3 ORDER BY a.id LIMIT $4
	) a ON true
	WHERE t.id = $1 AND t.tenant = $2 ORDER BY a.id`

// AttemptList returns a task's attempt log oldest first; the page token is
// the log key of the last attempt on the page.
func (s *Store) AttemptList(ctx context.Context, tenant, taskID string, page store.Page) ([]*store.Attempt, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	var after int64
	if page.Token != "" {
		var err error
		if after, err = pagetoken.DecodeInt("attempt", page.Token); err != nil {
			return nil, "", fmt.Errorf("postgres: list attempts: %w", err)
		}
	}
	if !textOK(tenant, taskID) {
		return nil, "", fmt.Errorf("postgres: task %q: %w", taskID, store.ErrNotFound)
	}
	limit := store.PageLimit(page.Limit)
	rows, err := s.pool.Query(ctx, attemptListSQL, taskID, tenant, after, limit+1)
	if err != nil {
		return nil, "", s.fail("list attempts", err)
	}
	defer rows.Close()
	found := false
	items := []*store.Attempt{}
	var last int64
	for rows.Next() {
		found = true
		var id, dur pgtype.Int8
		var number, status pgtype.Int4
		var started pgtype.Timestamptz
		var msg, body []byte
		if err := rows.Scan(&id, &number, &started, &dur, &status, &msg, &body); err != nil {
			return nil, "", s.fail("list attempts", err)
		}
		if !id.Valid { // the task has no attempts after the token
			break
		}
		if len(items) == limit {
			return items, pagetoken.EncodeInt("attempt", last), nil
		}
		items = append(items, &store.Attempt{TaskID: taskID, AttemptNumber: int(number.Int32),
			StartedAt: fromTS(started), Duration: time.Duration(dur.Int64), ResponseStatus: int(status.Int32),
			ErrorMessage: string(msg), ResponseBody: string(body)})
		last = id.Int64
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail("list attempts", err)
	}
	if !found {
		return nil, "", fmt.Errorf("postgres: task %s: %w", taskID, store.ErrNotFound)
	}
	return items, "", nil
}

// TaskCounts adds up retry_counts, which every write keeps in step, so it
// costs the same with any number of tasks.
func (s *Store) TaskCounts(ctx context.Context) (map[store.Status]int64, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	var n [6]int64
	err := s.pool.QueryRow(ctx, `SELECT sum(pending)::bigint, sum(in_flight)::bigint, sum(succeeded)::bigint,
		sum(exhausted)::bigint, sum(failed)::bigint, sum(cancelled)::bigint FROM retry_counts`).
		Scan(&n[0], &n[1], &n[2], &n[3], &n[4], &n[5])
	if err != nil {
		return nil, s.fail("task counts", err)
	}
	return map[store.Status]int64{
		store.Pending: n[0], store.InFlight: n[1], store.Succeeded: n[2],
		store.Exhausted: n[3], store.Failed: n[4], store.Cancelled: n[5],
	}, nil
}

// TenantCounts adds up tenant's rows of retry_tenant_counts (64 at most,
// read by their key), which every write keeps in step as it does
// retry_counts, so it costs the same with any number of tasks.
func (s *Store) TenantCounts(ctx context.Context, tenant string) (map[store.Status]int64, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	var n [6]int64
	if textOK(tenant) { // a name no task can have has none
		err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(pending), 0)::bigint, coalesce(sum(in_flight), 0)::bigint,
			coalesce(sum(succeeded), 0)::bigint, coalesce(sum(exhausted), 0)::bigint, coalesce(sum(failed), 0)::bigint,
			coalesce(sum(cancelled), 0)::bigint FROM retry_tenant_counts WHERE tenant = $1`, tenant).
			Scan(&n[0], &n[1], &n[2], &n[3], &n[4], &n[5])
		if err != nil {
			return nil, s.fail("tenant counts", err)
		}
	}
	return map[store.Status]int64{
		store.Pending: n[0], store.InFlight: n[1], store.Succeeded: n[2],
		store.Exhausted: n[3], store.Failed: n[4], store.Cancelled: n[5],
	}, nil
}
