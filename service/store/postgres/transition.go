package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
	"github.com/retrykit/retry/service/store/internal/prep"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// Run-row changes of TaskTransition; $1 is the task's seq, $2 Now.
const (
	cancelSQL = `UPDATE retry_runs SET status = 'CANCELLED', wake_at = NULL, lease_until = NULL, finished_at = $2,
		updated_at = $2, version = version + 1 WHERE task_seq = $1`
	redriveSQL = `UPDATE retry_runs SET status = 'PENDING', wake_at = $2, next_attempt_at = $2, budget_start = $2,
		attempt_number = 0, prev_delay_ns = 0, last_error = ''::bytea, last_status = 0, lease_until = NULL,
		finished_at = NULL, updated_at = $2, version = version + 1 WHERE task_seq = $1`
)

// TaskTransition cancels or redrives a task; see store.Store. It locks the
// task's run row first, as every write does, then its retry_tasks row, then
// its counts row.
func (s *Store) TaskTransition(ctx context.Context, tr store.Transition) (*store.Task, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	now, err := prep.Transition(&tr)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	change := cancelSQL
	if tr.To == store.Pending {
		change = redriveSQL
	}
	if !textOK(tr.Tenant, tr.TaskID) {
		return nil, fmt.Errorf("postgres: task %q: %w", tr.TaskID, store.ErrNotFound)
	}
	var out *store.Task
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var seq int64
		var from store.Status
		// The tenant is no index's condition, as in TaskGet.
		err := tx.QueryRow(ctx, `SELECT r.task_seq, r.status FROM retry_runs r JOIN retry_tasks t ON t.seq = r.task_seq
			WHERE t.id = $1 AND (t.tenant = $2) IS TRUE FOR UPDATE OF r`, tr.TaskID, tr.Tenant).Scan(&seq, &from)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("task %s: %w", tr.TaskID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if !slices.Contains(tr.From, from) {
			return fmt.Errorf("task %s is %s: %w", tr.TaskID, from, store.ErrConflict)
		}
		if _, err := tx.Exec(ctx, change, seq, ts(now)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE retry_tasks SET state = $2 WHERE seq = $1`, seq, taskstate.Of(tr.To)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `WITH moves AS (SELECT $1::text AS from_s, $2::text AS to_s, $3::text AS tenant), `+countsCTE+` SELECT`,
			string(from), string(tr.To), tr.Tenant); err != nil {
			return err
		}
		if out, _, err = scanTask(tx.QueryRow(ctx, taskSelect+` WHERE t.seq = $1`, seq)); err != nil {
			return err
		}
		if tr.To == store.Pending {
			d := store.Due{ID: out.ID, At: out.NextAttemptAt, Version: out.Version}
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel, feed.Note(d)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("transition", err)
	}
	return out, nil
}
