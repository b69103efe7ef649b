package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/retrykit/retry/service/store"
)

// dueSQL reads a batch of live tasks below a seq, newest first: wake_at is
// already the time the scheduler wants, NextAttemptAt or LeaseUntil.
const dueSQL = `SELECT seq, id, wake_at FROM tasks INDEXED BY tasks_state
	WHERE state = 'LIVE' AND seq < ? ORDER BY seq DESC LIMIT ?`

// TaskDue reports every live task and when it is next due; see store.Store.
func (s *Store) TaskDue(ctx context.Context, each func(id string, at time.Time)) error {
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
func dueBatch(ctx context.Context, st *sql.Stmt, below *int64, each func(string, time.Time)) (n int, err error) {
	rows, err := st.QueryContext(ctx, *below, store.DueBatch)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var wake int64
		if err := rows.Scan(below, &id, &wake); err != nil {
			return n, err
		}
		each(id, fromMs(wake))
		n++
	}
	return n, rows.Err()
}
