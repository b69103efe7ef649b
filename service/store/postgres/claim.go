package postgres

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
)

// claimSQL leases up to $2 due tasks in one statement; DUE is the query
// that picks and locks the candidates (see claimDueSQL and claimIDsSQL).
// $1 is Now, $3 the lease's end, $4 the message of a lost attempt, $5 the
// instance the leases name (NULL for none).
//
// The columns due returns are those of the row as locked (a row changed
// since the statement began is re-checked and read anew), which is why the
// lost attempts of expired leases are logged from due, not from a second
// read of retry_runs.
const claimSQL = `WITH due AS (
	DUE
), lost AS (
	INSERT INTO retry_attempts (task_seq, attempt_number, response_status, started_at, duration_ns, error_message,
		response_body)
	SELECT task_seq, attempt_number, 0, coalesce(claimed_at, lease_until),
		coalesce((extract(epoch FROM lease_until - claimed_at) * 1000000000)::bigint, 0), $4, ''::bytea
	FROM due WHERE status = 'IN_FLIGHT'
), r AS (
	UPDATE retry_runs r SET status = 'IN_FLIGHT', wake_at = $3, lease_until = $3, claimed_at = $1, updated_at = $1, holder = $5,
		attempt_number = r.attempt_number + 1, version = r.version + 1,
		last_error = CASE WHEN due.status = 'IN_FLIGHT' THEN $4 ELSE r.last_error END
	FROM due WHERE r.task_seq = due.task_seq
	RETURNING r.*, due.wake_at AS due_at, due.status AS was
), moves AS (SELECT r.was AS from_s, 'IN_FLIGHT'::text AS to_s, t.tenant FROM r JOIN retry_tasks t ON t.seq = r.task_seq),
` + countsCTE + `
SELECT r.was, ` + taskCols + ` FROM r JOIN retry_tasks t ON t.seq = r.task_seq ORDER BY r.due_at, r.task_seq`

var (
	// claimDueSQL takes the candidates earliest first straight off the
	// retry_runs_wake index, locking each and skipping any another
	// transaction holds, so concurrent claims neither wait for nor repeat
	// each other.
	claimDueSQL = strings.Replace(claimSQL, "DUE", `SELECT task_seq, status, wake_at, attempt_number, claimed_at, lease_until FROM retry_runs
	WHERE wake_at <= $1 ORDER BY wake_at, task_seq LIMIT $2 FOR UPDATE SKIP LOCKED`, 1)

	// claimIDsSQL looks up each of the IDs $6 by itself (a LATERAL query
	// with a lock, run once per ID) and locks its task if it is due. The
	// claim as one join kept the generic plan made while the table was
	// small: a scan of retry_runs_wake up to Now, a backlog's entries and
	// the dead ones of rows updated since the last vacuum (a bitmap scan
	// never marks them dead), thousands for one task. Per ID, the planner
	// still took that index for the due condition when the statistics said
	// the table was small, so the condition is written (IS TRUE) so that no
	// index can serve it: the run is found through its primary key.
	// Every due ID is locked before LIMIT takes the earliest; the scheduler
	// asks for as many as it names, and a lock past the limit ends with the
	// statement.
	claimIDsSQL = strings.Replace(claimSQL, "DUE", `SELECT cand.* FROM (SELECT DISTINCT unnest($6::text[])) AS v(id)
	CROSS JOIN LATERAL (SELECT run.task_seq, run.status, run.wake_at, run.attempt_number, run.claimed_at, run.lease_until
		FROM retry_tasks t JOIN retry_runs run ON run.task_seq = t.seq
		WHERE t.id = v.id AND (run.wake_at <= $1) IS TRUE FOR UPDATE OF run SKIP LOCKED) cand
	ORDER BY cand.wake_at, cand.task_seq LIMIT $2`, 1)
)

// TaskClaim leases due tasks; see store.Store. It is one statement
// whatever the number of tasks.
func (s *Store) TaskClaim(ctx context.Context, p store.ClaimParams) ([]*store.Task, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.Truncate(time.Millisecond)
	holder := s.holder()
	params := []any{now, p.ClaimLimit(), ts(now.Add(p.Lease)), []byte(store.LeaseExpiredMessage), pgtype.Text{String: holder, Valid: holder != ""}}
	var q string
	var args []any
	var ids []string
	if len(p.IDs) > 0 {
		ids = make([]string, 0, len(p.IDs))
		for _, id := range p.IDs {
			if textOK(id) { // no task has any other
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil, nil
		}
		q, args = claimIDsSQL, append(params, ids)
	} else {
		// A claim without IDs goes with its values in the text (pgx's
		// simple protocol), so it is planned at each run with its limit
		// and the tables' sizes known: a generic plan takes LIMIT $2 for a
		// tenth of the due rows and, made on a small table, joins that many
		// to the tasks by scanning them, thousands of entries for one task.
		// retryd's scheduler claims by ID, so the planning costs it nothing.
		q, args = claimDueSQL, append([]any{pgx.QueryExecModeSimpleProtocol}, params...)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.fail("claim", err)
	}
	defer rows.Close()
	var out []*store.Task
	var reclaimed []string
	for rows.Next() {
		var was store.Status
		t, _, err := scanTask(prefixed{rows, &was})
		if err != nil {
			return nil, s.fail("claim", err)
		}
		t.Holder = holder
		if was == store.InFlight {
			reclaimed = append(reclaimed, t.ID)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("claim", err)
	}
	if len(reclaimed) > 0 {
		s.log.LogAttrs(ctx, slog.LevelWarn, "postgres: reclaimed tasks whose lease expired; lost attempts logged",
			slog.Int("count", len(reclaimed)), slog.Any("tasks", reclaimed[:min(len(reclaimed), 10)]))
	}
	if p.Later != nil && len(out) < len(ids) {
		// ids, not p.IDs: those holding bytes PostgreSQL's text refuses are left out.
		if err := s.unclaimed(ctx, store.ClaimParams{IDs: ids}.Unclaimed(out), p.Later); err != nil {
			return nil, s.fail("claim", err)
		}
	}
	return out, nil
}

// unclaimedSQL reads when live tasks are due. A task that a concurrent
// claim has locked but not committed reads as it was before, due now: the
// caller asks for it again, and then hears of the lease. The tasks are
// found by ID only: written plainly, the state condition let a generic
// plan made on an empty table read every live task through
// retry_tasks_state (as claimIDsSQL's due condition did).
const unclaimedSQL = `SELECT t.id, r.wake_at, r.version FROM retry_tasks t JOIN retry_runs r ON r.task_seq = t.seq
	WHERE t.id = ANY($1) AND (t.state = 'LIVE') IS TRUE`

// unclaimed tells later when each live task of ids is due.
func (s *Store) unclaimed(ctx context.Context, ids []string, later func(store.Due)) error {
	rows, err := s.pool.Query(ctx, unclaimedSQL, ids)
	if err != nil {
		return err
	}
	var due []store.Due
	for rows.Next() {
		var d store.Due
		var wake pgtype.Timestamptz
		if err := rows.Scan(&d.ID, &wake, &d.Version); err != nil {
			rows.Close()
			return err
		}
		d.At = fromTS(wake)
		due = append(due, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range due {
		later(d)
	}
	return nil
}

// prefixed scans a row whose first column is extra and the rest the
// columns the wrapped scan wants.
type prefixed struct {
	row   interface{ Scan(...any) error }
	extra any
}

func (p prefixed) Scan(dest ...any) error {
	return p.row.Scan(append([]any{p.extra}, dest...)...)
}
