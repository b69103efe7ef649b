package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// TaskFinish records outcomes of claimed attempts; see store.Store.
// Concurrent calls share one transaction (see the package documentation).
func (s *Store) TaskFinish(ctx context.Context, fs []store.Finish) ([]error, error) {
	if len(fs) == 0 {
		return []error{}, nil
	}
	op := &writeOp{finish: fs, errs: make([]error, len(fs))}
	if err := s.write(ctx, op); err != nil {
		return nil, fmt.Errorf("sqlite: finish: %w", err)
	}
	return op.errs, nil
}

// finishRef is one Finish item of a TaskFinish op.
type finishRef struct {
	op *writeOp
	i  int
}

func (r finishRef) f() *store.Finish { return &r.op.finish[r.i] }

// finishMerged applies the items of every TaskFinish op of a batch with a
// few statements per round. A round holds each task once: the second
// Finish of a task waits for the next round, so items apply in order.
func finishMerged(w *wtx, ops []*writeOp) error {
	var items []finishRef
	for _, op := range ops {
		clear(op.errs)
		for i := range op.finish {
			items = append(items, finishRef{op, i})
		}
	}
	for len(items) > 0 {
		seen := make(map[string]bool, len(items))
		var round, later []finishRef
		for _, r := range items {
			if id := r.f().TaskID; seen[id] {
				later = append(later, r)
			} else {
				seen[id] = true
				round = append(round, r)
			}
		}
		if err := w.finishRound(round); err != nil {
			return err
		}
		items = later
	}
	return nil
}

// finishRound applies items of distinct tasks: one UPDATE for the retries,
// one for the others, one INSERT for their attempts, each with its rows
// bound as VALUES (see bulk).
func (w *wtx) finishRound(items []finishRef) error {
	byID := make(map[string]finishRef, len(items))
	var retries, ends [][]any
	for _, r := range items {
		f := r.f()
		if err := prep.Finish(f); err != nil {
			r.op.errs[r.i] = err
			continue
		}
		byID[f.TaskID] = r
		now, next := prep.FinishTimes(f)
		row := []any{f.TaskID, f.Version, string(f.Status), epochms.Of(next), int64(f.PrevDelay), f.LastError,
			f.LastStatus, epochms.Of(now), min(f.Attempt.AttemptNumber, 1), held(f)}
		if f.Status == store.Pending {
			retries = append(retries, row)
		} else {
			ends = append(ends, row)
		}
	}
	var attempts [][]any
	collect := func(rows *sql.Rows) error {
		var err error
		attempts, err = w.finished(rows, byID, attempts)
		return err
	}
	// Two statements, because SQLite updates every index that mentions a
	// column the SET list names, whatever its new value: a retry must not
	// name state.
	if err := w.bulk(finishRetrySQL, params(10), retries, collect); err != nil {
		return err
	}
	if err := w.bulk(finishEndSQL, params(10), ends, collect); err != nil {
		return err
	}
	if err := w.bulk(attemptInsertSQL, params(8), attempts, nil); err != nil {
		return err
	}
	return w.refuse(byID)
}

const finishUpdateSQL = `WITH v(v_id, v_version, v_status, v_next, v_prev_delay, v_last_error, v_last_status, v_now,
		v_logged, v_held) AS (VALUES %s)
	UPDATE OR FAIL tasks SET %s, prev_delay_ns = v_prev_delay, last_error = v_last_error, last_status = v_last_status,
		lease_until = 0, updated_at = v_now, version = version + 1, log_count = log_count + v_logged
	FROM v WHERE id = v_id AND version = v_version AND status = 'IN_FLIGHT'
	RETURNING id, seq, log_count, tenant`

var (
	finishRetrySQL = fmt.Sprintf(finishUpdateSQL, "%s",
		"status = 'PENDING', wake_at = v_next, next_attempt_at = v_next, attempt_number = attempt_number - v_held")
	finishEndSQL = fmt.Sprintf(finishUpdateSQL, "%s",
		"state = v_status, status = v_status, finished_at = v_now")
)

const attemptInsertSQL = `INSERT OR FAIL INTO attempts (task_seq, n, attempt_number, started_at, duration_ns,
	response_status, error_message, response_body) VALUES %s`

// held is 1 for a Finish that takes its claim's attempt back
// (store.Finish.Held), else 0: what the retry's UPDATE subtracts from the
// attempt count.
func held(f *store.Finish) int {
	if f.Held {
		return 1
	}
	return 0
}

// finished reads the tasks an UPDATE of finishRound changed, counts them
// and appends the rows of their attempts to attempts.
// What is left in byID was not changed.
func (w *wtx) finished(rows *sql.Rows, byID map[string]finishRef, attempts [][]any) ([][]any, error) {
	defer rows.Close()
	for rows.Next() {
		var id, tenant string
		var seq, n int64
		if err := rows.Scan(&id, &seq, &n, &tenant); err != nil {
			return nil, err
		}
		r := byID[id]
		delete(byID, id)
		f := r.f()
		w.move(tenant, store.InFlight, f.Status)
		if a := &f.Attempt; a.AttemptNumber > 0 {
			attempts = append(attempts, []any{seq, n - 1, a.AttemptNumber, epochms.Of(a.StartedAt), int64(a.Duration),
				a.ResponseStatus, a.ErrorMessage, a.ResponseBody})
		}
	}
	return attempts, rows.Err()
}

// refuse sets the errors of the items the UPDATE did not apply: their task
// moved on (ErrLeaseLost) or never was (ErrNotFound).
func (w *wtx) refuse(byID map[string]finishRef) error {
	if len(byID) == 0 {
		return nil
	}
	ids := make([]any, 0, len(byID))
	for id, r := range byID {
		ids = append(ids, id)
		r.op.errs[r.i] = fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	return w.inList(`SELECT id FROM tasks WHERE id IN (%s)`, nil, ids, func(rows *sql.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			r := byID[id]
			r.op.errs[r.i] = fmt.Errorf("task %s version %d: %w", id, r.f().Version, store.ErrLeaseLost)
		}
		return rows.Err()
	})
}
