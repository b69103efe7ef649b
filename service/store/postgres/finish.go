package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// finishSQL applies a round of finishes, given as parallel arrays, in one
// statement: the run rows whose version and state match, their attempts,
// the state of those that ended, the counts, and a notification for each
// retry. It returns, for every item i, whether it applied and whether its
// task exists. Items lock their run rows in the order of the arrays, which
// TaskFinish sorts by task ID, so two overlapping calls lock alike.
//
// Each item finds its rows by itself, whatever the statistics the
// connection's generic plan was made with: its task by ID, its run by key
// and, if it ended, its task again, each through a range of one key (see
// poolConfig). Written as joins on equal keys, a plan made while the
// tables were small scanned a whole primary key instead, some 2,000
// entries a finish once a backlog of 2,000 tasks had arrived
// (TestTaskLifeDoesNotReadTheBacklog).
const finishSQL = `WITH v AS (
	SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::bigint[],
		$7::bytea[], $8::int[], $9::timestamptz[], $10::int[], $11::timestamptz[], $12::bigint[], $13::int[],
		$14::bytea[], $15::bytea[], $16::text[], $17::int[])
	AS v(i, id, version, status, next_at, prev_delay_ns, last_error, last_status, now, a_number, a_started,
		a_duration, a_status, a_error, a_body, note, held)
), done AS (
	UPDATE retry_runs r SET status = v.status,
		wake_at = CASE WHEN v.status = 'PENDING' THEN v.next_at END,
		next_attempt_at = CASE WHEN v.status = 'PENDING' THEN v.next_at ELSE r.next_attempt_at END,
		finished_at = CASE WHEN v.status = 'PENDING' THEN NULL ELSE v.now END,
		prev_delay_ns = v.prev_delay_ns, last_error = v.last_error, last_status = v.last_status,
		lease_until = NULL, updated_at = v.now, version = r.version + 1, attempt_number = r.attempt_number - v.held
	FROM v JOIN retry_tasks t ON t.id >= v.id AND t.id <= v.id
	WHERE r.task_seq >= t.seq AND r.task_seq <= t.seq AND r.version = v.version AND r.status = 'IN_FLIGHT'
	RETURNING v.i, r.task_seq, r.status, t.tenant
), logged AS (
	INSERT INTO retry_attempts (task_seq, attempt_number, response_status, started_at, duration_ns, error_message,
		response_body)
	SELECT d.task_seq, v.a_number, v.a_status, v.a_started, v.a_duration, v.a_error, v.a_body
	FROM done d JOIN v ON v.i = d.i WHERE v.a_number > 0 ORDER BY v.i
), ended AS (
	UPDATE retry_tasks t SET state = d.status FROM done d
	WHERE t.seq >= d.task_seq AND t.seq <= d.task_seq AND d.status <> 'PENDING'
), moves AS (SELECT 'IN_FLIGHT'::text AS from_s, status AS to_s, tenant FROM done),
` + countsCTE + `
SELECT v.i, d.i IS NOT NULL, d.i IS NOT NULL OR EXISTS (SELECT FROM retry_tasks t WHERE t.id = v.id)
FROM v LEFT JOIN done d ON d.i = v.i
	LEFT JOIN LATERAL (SELECT pg_notify($18, v.note) WHERE d.status = 'PENDING') n ON true`

// TaskFinish records outcomes of claimed attempts; see store.Store. Any
// number of them takes one statement, so one round trip and one commit,
// unless a task appears more than once: its later items then go in later
// statements of the same transaction, so that items apply in order.
func (s *Store) TaskFinish(ctx context.Context, fs []store.Finish) ([]error, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	errs := make([]error, len(fs))
	var rounds [][]int
	seen := map[string]int{}
	for i, f := range fs {
		if err := prep.Finish(&f); err != nil {
			errs[i] = fmt.Errorf("postgres: %w", err)
			continue
		}
		if !textOK(f.TaskID) {
			errs[i] = fmt.Errorf("postgres: task %q: %w", f.TaskID, store.ErrNotFound)
			continue
		}
		n := seen[f.TaskID]
		seen[f.TaskID] = n + 1
		if n == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[n] = append(rounds[n], i)
	}
	var err error
	switch len(rounds) {
	case 0:
	case 1:
		err = s.finishRound(ctx, s.pool, fs, rounds[0], errs)
	default:
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for _, r := range rounds {
				if err := s.finishRound(ctx, tx, fs, r, errs); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return nil, s.fail("finish", err)
	}
	return errs, nil
}

// querier is what finishRound needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// finishRound runs finishSQL for the items idx of fs, which name distinct
// tasks, and sets their errors.
func (s *Store) finishRound(ctx context.Context, q querier, fs []store.Finish, idx []int, errs []error) error {
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(fs[a].TaskID, fs[b].TaskID) })
	n := len(idx)
	var (
		is, lastStatus, aNumber, aStatus = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		held                             = make([]int32, n) // 1: take the claim's attempt back (store.Finish.Held)
		ids, statuses, notes             = make([]string, n), make([]string, n), make([]string, n)
		versions, prevDelay, aDuration   = make([]int64, n), make([]int64, n), make([]int64, n)
		next, now, aStarted              = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		lastError, aError, aBody         = make([][]byte, n), make([][]byte, n), make([][]byte, n)
	)
	for k, i := range idx {
		f := &fs[i]
		at, due := prep.FinishTimes(f)
		is[k], ids[k], versions[k], statuses[k] = int32(i), f.TaskID, f.Version, string(f.Status)
		next[k], now[k] = due.Truncate(time.Millisecond), at.Truncate(time.Millisecond)
		prevDelay[k], lastError[k], lastStatus[k] = int64(f.PrevDelay), bytesOf(f.LastError), int32(f.LastStatus)
		a := &f.Attempt
		aNumber[k], aStarted[k], aDuration[k] = int32(a.AttemptNumber), a.StartedAt.Truncate(time.Millisecond), int64(a.Duration)
		aStatus[k], aError[k], aBody[k] = int32(a.ResponseStatus), bytesOf(a.ErrorMessage), bytesOf(a.ResponseBody)
		if f.Held {
			held[k] = 1
		}
		if f.Status == store.Pending {
			notes[k] = feed.Note(store.Due{ID: f.TaskID, At: due, Version: f.Version + 1})
		}
	}
	rows, err := q.Query(ctx, finishSQL, is, ids, versions, statuses, next, prevDelay, lastError, lastStatus, now,
		aNumber, aStarted, aDuration, aStatus, aError, aBody, notes, held, s.channel)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var i int32
		var applied, exists bool
		if err := rows.Scan(&i, &applied, &exists); err != nil {
			return err
		}
		f := &fs[i]
		switch {
		case applied:
			errs[i] = nil
		case exists:
			errs[i] = fmt.Errorf("postgres: task %s version %d: %w", f.TaskID, f.Version, store.ErrLeaseLost)
		default:
			errs[i] = fmt.Errorf("postgres: task %s: %w", f.TaskID, store.ErrNotFound)
		}
	}
	return rows.Err()
}

// bytesOf is s as a bytea value, never NULL.
func bytesOf(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}
