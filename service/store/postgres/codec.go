package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/headerjson"
)

// ts is t as a parameter: NULL for the zero time, else t cut to the
// millisecond, the precision the store promises and keeps.
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Truncate(time.Millisecond)
}

// fromTS is a column read back: the zero time for NULL, else UTC.
func fromTS(p pgtype.Timestamptz) time.Time {
	if !p.Valid {
		return time.Time{}
	}
	return p.Time.UTC()
}

// taskCols are the columns scanTask reads, in its order: t is a row of
// retry_tasks, r its row of retry_runs (or a RETURNING list of one).
const taskCols = `t.seq, t.id, t.tenant, t.idempotency_key, t.request_hash, t.policy_id, t.method, t.target_url,
	t.headers, t.body, t.body_binary, t.body_ref, t.body_size, t.created_at, r.status, r.attempt_number, r.next_attempt_at, r.prev_delay_ns,
	r.budget_start, r.last_error, r.last_status, r.lease_until, r.version, r.updated_at, r.finished_at`

// taskSelect reads whole tasks; callers add WHERE, ORDER BY and LIMIT.
const taskSelect = `SELECT ` + taskCols + ` FROM retry_tasks t JOIN retry_runs r ON r.task_seq = t.seq`

// keyLookup reads, for each row of a relation v(tenant, key) that the
// caller puts before it, the task holding that key, if any, each key by
// itself (see poolConfig): joined, a batch's keys were hash-joined to a
// whole index. On a table never analyzed the planner may still take
// another index that starts with tenant, until the first analyze.
const keyLookup = ` CROSS JOIN LATERAL (SELECT * FROM retry_tasks t
		WHERE t.tenant = v.tenant AND t.idempotency_key = v.key OFFSET 0) t
	CROSS JOIN LATERAL (SELECT * FROM retry_runs r WHERE r.task_seq = t.seq OFFSET 0) r`

// taskListSelect is taskSelect for lists, which walk an index of
// retry_tasks newest first and look each task's run row up by its key. The
// OFFSET 0 fence keeps the planner from scanning retry_runs backwards
// instead, filtering as it goes, which its estimates sometimes favour and
// which reads every newer task when the ones listed are old.
const taskListSelect = `SELECT ` + taskCols + ` FROM retry_tasks t
	CROSS JOIN LATERAL (SELECT * FROM retry_runs r WHERE r.task_seq = t.seq OFFSET 0) r`

// scanTask reads one row of taskCols and returns the task and its seq.
func scanTask(row pgx.Row) (*store.Task, int64, error) {
	t := &store.Task{}
	var seq, prevDelay int64
	var headers, lastError []byte
	var created, next, budget, lease, updated, finished pgtype.Timestamptz
	if err := row.Scan(&seq, &t.ID, &t.Tenant, &t.IdempotencyKey, &t.RequestHash, &t.PolicyID, &t.Method,
		&t.TargetURL, &headers, &t.Body, &t.BodyBinary, &t.BodyRef, &t.BodySize, &created, &t.Status, &t.AttemptNumber, &next, &prevDelay,
		&budget, &lastError, &t.LastStatus, &lease, &t.Version, &updated, &finished); err != nil {
		return nil, 0, err
	}
	if t.Body == nil {
		t.Body = []byte{}
	}
	if t.BodyRef == "" {
		t.BodySize = int64(len(t.Body)) // rows older than body_size hold 0
	}
	h, err := headerjson.Decode(headers)
	if err != nil {
		return nil, 0, fmt.Errorf("task %s: %w", t.ID, err)
	}
	t.Headers = h
	t.LastError = string(lastError)
	t.PrevDelay = time.Duration(prevDelay)
	t.CreatedAt, t.NextAttemptAt, t.BudgetStart = fromTS(created), fromTS(next), fromTS(budget)
	t.LeaseUntil, t.UpdatedAt, t.FinishedAt = fromTS(lease), fromTS(updated), fromTS(finished)
	return t, seq, nil
}

// countsCTE is two WITH items that apply the moves listed by the WITH item
// "moves" (columns from_s and to_s, from_s NULL for a new task and to_s
// NULL for a deleted one, and tenant) to this connection's row of
// retry_counts and to its rows of retry_tenant_counts, one per tenant
// moved. Their row locks must be the last locks a transaction takes, and
// they are: the counts depend on every row the statement changed, so they
// are written after those rows are locked. Among themselves, the counts
// row is locked first (the tenant rows' statement waits for it through
// the subquery on counted), then the tenants' rows in the order of their
// names, so that two transactions of one shard never wait for each other
// both ways.
const countsCTE = `counted AS (UPDATE retry_counts c SET
		pending = c.pending + d.pending, in_flight = c.in_flight + d.in_flight,
		succeeded = c.succeeded + d.succeeded, exhausted = c.exhausted + d.exhausted,
		failed = c.failed + d.failed, cancelled = c.cancelled + d.cancelled
	FROM (SELECT ` + countDeltas + `
		FROM moves HAVING count(*) FILTER (WHERE from_s IS DISTINCT FROM to_s) > 0) d
	WHERE c.shard = pg_backend_pid() % 64 RETURNING c.shard
), tenant_counted AS (INSERT INTO retry_tenant_counts AS c (tenant, shard, pending, in_flight, succeeded,
		exhausted, failed, cancelled)
	SELECT tenant, pg_backend_pid() % 64, ` + countDeltas + `
	FROM moves WHERE (SELECT count(*) FROM counted) >= 0
	GROUP BY tenant HAVING count(*) FILTER (WHERE from_s IS DISTINCT FROM to_s) > 0 ORDER BY tenant
	ON CONFLICT (tenant, shard) DO UPDATE SET
		pending = c.pending + excluded.pending, in_flight = c.in_flight + excluded.in_flight,
		succeeded = c.succeeded + excluded.succeeded, exhausted = c.exhausted + excluded.exhausted,
		failed = c.failed + excluded.failed, cancelled = c.cancelled + excluded.cancelled)`

// countDeltas are the changes of the six counts that the rows of moves
// make, as columns named after the counts.
const countDeltas = `
		count(*) FILTER (WHERE to_s = 'PENDING') - count(*) FILTER (WHERE from_s = 'PENDING') AS pending,
		count(*) FILTER (WHERE to_s = 'IN_FLIGHT') - count(*) FILTER (WHERE from_s = 'IN_FLIGHT') AS in_flight,
		count(*) FILTER (WHERE to_s = 'SUCCEEDED') - count(*) FILTER (WHERE from_s = 'SUCCEEDED') AS succeeded,
		count(*) FILTER (WHERE to_s = 'EXHAUSTED') - count(*) FILTER (WHERE from_s = 'EXHAUSTED') AS exhausted,
		count(*) FILTER (WHERE to_s = 'FAILED') - count(*) FILTER (WHERE from_s = 'FAILED') AS failed,
		count(*) FILTER (WHERE to_s = 'CANCELLED') - count(*) FILTER (WHERE from_s = 'CANCELLED') AS cancelled`
