package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
)

// AttemptList returns a task's attempt log oldest first; the page token is
// the log position of the last attempt on the page.
func (s *Store) AttemptList(ctx context.Context, tenant, taskID string, page store.Page) ([]*store.Attempt, string, error) {
	var after int64 = -1
	if page.Token != "" {
		n, err := pagetoken.DecodeInt("attempt", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list attempts: %w", err)
		}
		after = n - 1 // tokens hold n+1: DecodeInt wants a positive key
	}
	// One read transaction, so that the task and its log agree.
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list attempts: %w", err)
	}
	defer tx.Rollback()
	var seq int64
	err = tx.QueryRowContext(ctx, `SELECT seq FROM tasks WHERE id = ? AND tenant = ?`, taskID, tenant).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", fmt.Errorf("sqlite: task %s: %w", taskID, store.ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list attempts: %w", err)
	}
	limit := store.PageLimit(page.Limit)
	rows, err := tx.QueryContext(ctx, `SELECT n, attempt_number, started_at, duration_ns, response_status,
		error_message, response_body FROM attempts WHERE task_seq = ? AND n > ? ORDER BY n LIMIT ?`,
		seq, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list attempts: %w", err)
	}
	defer rows.Close()
	var items []*store.Attempt
	var last int64
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.EncodeInt("attempt", last+1), rows.Close()
		}
		a := &store.Attempt{TaskID: taskID}
		var started, dur int64
		if err := rows.Scan(&last, &a.AttemptNumber, &started, &dur, &a.ResponseStatus,
			&a.ErrorMessage, &a.ResponseBody); err != nil {
			return nil, "", fmt.Errorf("sqlite: list attempts: %w", err)
		}
		a.StartedAt, a.Duration = epochms.Time(started), time.Duration(dur)
		items = append(items, a)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list attempts: %w", err)
	}
	return items, "", nil
}

func (s *Store) readTx(ctx context.Context) (*sql.Tx, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	return s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
}

// TaskCounts returns the number of tasks in each state from a table every
// write keeps in step, so it costs the same with any number of tasks.
func (s *Store) TaskCounts(ctx context.Context) (map[store.Status]int64, error) {
	return s.counts(ctx, "task counts", `SELECT status, n FROM task_counts`)
}

// TenantCounts returns the number of tenant's tasks in each state from a
// table every write keeps in step, as TaskCounts does: a few rows read by
// their key, whatever the number of the tenant's tasks.
func (s *Store) TenantCounts(ctx context.Context, tenant string) (map[store.Status]int64, error) {
	return s.counts(ctx, "tenant counts", `SELECT status, n FROM tenant_counts WHERE tenant = ?`, tenant)
}

// counts reads (status, n) rows into a map that has every status.
func (s *Store) counts(ctx context.Context, what, query string, args ...any) (map[store.Status]int64, error) {
	st, err := s.read(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	defer rows.Close()
	out := store.ZeroCounts()
	for rows.Next() {
		var st store.Status
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}
