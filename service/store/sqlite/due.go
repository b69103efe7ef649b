package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// dueSQL reads a batch of live tasks below a seq, newest first: wake_at is
// already the time the scheduler wants, NextAttemptAt or LeaseUntil.
const dueSQL = `SELECT seq, id, wake_at, version FROM tasks INDEXED BY tasks_state
	WHERE state = 'LIVE' AND seq < ? ORDER BY seq DESC LIMIT ?`

// TaskDue reports every live task and when it is next due; see store.Store.
func (s *Store) TaskDue(ctx context.Context, each func(store.Due)) error {
	st, err := s.read(ctx, dueSQL)
	if err != nil {
		return fmt.Errorf("sqlite: due tasks: %w", err)
	}
	for below := int64(math.MaxInt64); ; {
		n, err := dueBatch(ctx, st, &below, each)
		if err != nil {
			return fmt.Errorf("sqlite: due tasks: %w", err)
		}
		if n < store.DueBatch {
			return nil
		}
	}
}

// dueBatch reports the batch below *below and moves *below past it.
func dueBatch(ctx context.Context, st *sql.Stmt, below *int64, each func(store.Due)) (n int, err error) {
	rows, err := st.QueryContext(ctx, *below, store.DueBatch)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var d store.Due
		var wake int64
		if err := rows.Scan(below, &d.ID, &wake, &d.Version); err != nil {
			return n, err
		}
		d.At = epochms.Time(wake)
		each(d)
		n++
	}
	return n, rows.Err()
}
