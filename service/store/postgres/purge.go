package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/retrykit/retry/service/store"
)

// purgeSQL deletes up to $2 terminal tasks that ended before $1, oldest
// first, with their attempt logs and counts, in one statement. It locks the
// run rows first, as every write does, skipping those another transaction
// holds (a redrive's: once it commits, the task is no longer terminal),
// then the task rows, then the counts row. The partial index
// retry_runs_finished holds exactly the terminal tasks.
const purgeSQL = `WITH old AS (
	SELECT task_seq FROM retry_runs
	WHERE finished_at < $1 AND status IN ('SUCCEEDED', 'EXHAUSTED', 'FAILED', 'CANCELLED')
	ORDER BY finished_at, task_seq LIMIT $2 FOR UPDATE SKIP LOCKED
), runs AS (
	DELETE FROM retry_runs r USING old WHERE r.task_seq = old.task_seq RETURNING r.task_seq, r.status
), gone AS (
	DELETE FROM retry_tasks t USING runs WHERE t.seq = runs.task_seq RETURNING t.seq, t.body_ref, t.tenant
), logs AS (
	DELETE FROM retry_attempts a USING gone WHERE a.task_seq = gone.seq
), moves AS (SELECT runs.status AS from_s, NULL::text AS to_s, gone.tenant FROM runs JOIN gone ON gone.seq = runs.task_seq),
` + countsCTE + `
SELECT count(*), coalesce(array_agg(DISTINCT body_ref ORDER BY body_ref) FILTER (WHERE body_ref <> ''), '{}')
FROM gone`

// TaskPurge deletes old terminal tasks with their attempt logs, in one
// statement; see store.Purger.
func (s *Store) TaskPurge(ctx context.Context, before time.Time, limit int) ([]string, int, error) {
	if s.closed.Load() {
		return nil, 0, store.ErrClosed
	}
	var n int
	var refs []string
	if err := s.pool.QueryRow(ctx, purgeSQL, before, store.PurgeLimit(limit)).Scan(&n, &refs); err != nil {
		return nil, 0, s.fail("purge", err)
	}
	if len(refs) == 0 {
		refs = nil
	}
	return refs, n, nil
}

// BodyRefsInUse tells which of refs some task holds; see store.Purger.
func (s *Store) BodyRefsInUse(ctx context.Context, refs []string) (map[string]bool, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	out := map[string]bool{}
	refs = slices.DeleteFunc(slices.Clone(refs), func(r string) bool { return r == "" || !textOK(r) })
	if len(refs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT body_ref FROM retry_tasks
		WHERE body_ref <> '' AND body_ref = ANY($1)`, refs)
	if err != nil {
		return nil, s.fail("body refs in use", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			return nil, s.fail("body refs in use", err)
		}
		out[ref] = true
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("body refs in use", err)
	}
	return out, nil
}

var _ store.Purger = (*Store)(nil)
