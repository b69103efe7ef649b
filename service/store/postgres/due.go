package postgres

import (
	"context"
	"math"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
)

// dueSQL reads a batch of live tasks below a seq, newest first, through
// retry_tasks_state: wake_at is already the time the scheduler wants,
// NextAttemptAt or LeaseUntil.
const dueSQL = `SELECT t.seq, t.id, r.wake_at, r.version FROM retry_tasks t JOIN retry_runs r ON r.task_seq = t.seq
	WHERE t.state = 'LIVE' AND t.seq < $1 ORDER BY t.seq DESC LIMIT $2`

// TaskDue reports every live task and when it is next due; see store.Store.
func (s *Store) TaskDue(ctx context.Context, each func(store.Due)) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	for below := int64(math.MaxInt64); ; {
		rows, err := s.pool.Query(ctx, dueSQL, below, store.DueBatch)
		if err != nil {
			return s.fail("due tasks", err)
		}
		n := 0
		for rows.Next() {
			var d store.Due
			var wake pgtype.Timestamptz
			if err := rows.Scan(&below, &d.ID, &wake, &d.Version); err != nil {
				rows.Close()
				return s.fail("due tasks", err)
			}
			d.At = fromTS(wake)
			each(d)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.fail("due tasks", err)
		}
		if n < store.DueBatch {
			return nil
		}
	}
}
