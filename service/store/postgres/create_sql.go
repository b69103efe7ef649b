package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/targethost"
)

// createSQL inserts one segment of a batch (see planCreate), given as
// parallel arrays in the order the rows are to be inserted, with their
// run rows and counts, and sends the notes of the tasks it created, those
// of a chunk (see segmentArgs) in one notification. It answers the
// positions (from 1) of the rows it inserted.
//
// A row whose ID or key is taken is skipped, whether by a committed task,
// by an earlier row of the same statement (rows are inserted in order, and
// DO NOTHING sees them), or by a concurrent transaction, which ON CONFLICT
// waits for. The statement's snapshot predates that last kind, so the
// tasks that made rows skip are read by lookupSQL, a later statement; the
// statement flags the transaction when it skipped any row, so that the
// lookup costs nothing otherwise.
var createSQL = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::bytea[], $10::bool[], $11::timestamptz[], $12::timestamptz[], $13::timestamptz[],
		$14::text[], $15::int[], $18::text[], $19::bigint[], $20::text[], $21::timestamptz[]) WITH ORDINALITY
	AS v(id, tenant, key, hash, policy_id, method, target_url, headers, body, body_binary, created_at, next_at,
		budget_start, note, chunk, body_ref, body_size, target_host, lease, o)
), ins AS (
	INSERT INTO retry_tasks (id, tenant, idempotency_key, request_hash, policy_id, state, method, target_url,
		headers, body, body_binary, body_ref, body_size, created_at, target_host)
	SELECT id, tenant, key, hash, policy_id, 'LIVE', method, target_url, headers::json, body, body_binary,
		body_ref, body_size, created_at, target_host FROM v ORDER BY o
	ON CONFLICT DO NOTHING RETURNING seq, id
), made AS (
	SELECT ins.seq, v.o, v.tenant, v.next_at, v.budget_start, v.created_at, v.note, v.chunk, v.lease,
		CASE WHEN v.lease IS NULL THEN 'PENDING' ELSE 'IN_FLIGHT' END AS status
	FROM ins JOIN v ON v.id = ins.id
), run AS (
	INSERT INTO retry_runs ` + runCols + `
	SELECT seq, ` + claimedRun("$22") + ` FROM made
), moves AS (SELECT NULL::text AS from_s, status AS to_s, tenant FROM made),
` + countsCTE + `, notes AS (SELECT string_agg(note, E'\n') AS payload FROM made WHERE lease IS NULL GROUP BY chunk)
SELECT array_agg(o), (SELECT count(*) FROM notes, LATERAL pg_notify($16, notes.payload)),
	CASE WHEN count(*) < $17 THEN set_config('retrykit.create_skipped', 'y', true) END
FROM made`

// claimedRun is the run row of a new task after its seq, from the columns
// created_at, next_at, budget_start, lease (NULL unless it is created
// claimed: see store.Task.ClaimAtCreate) and status, and the parameter
// holder: as TaskClaim at created_at would leave a claimed one.
func claimedRun(holder string) string {
	return `CASE WHEN lease IS NULL THEN 1 ELSE 2 END, coalesce(lease, next_at), next_at, budget_start,
		created_at, 0, CASE WHEN lease IS NULL THEN 0 ELSE 1 END, 0, status, ''::bytea,
		CASE WHEN lease IS NOT NULL THEN created_at END, lease, CASE WHEN lease IS NOT NULL THEN ` + holder + `::text END`
}

// runCols are the columns of a new run row, claimedRun's after task_seq.
const runCols = `(task_seq, version, wake_at, next_attempt_at, budget_start, updated_at, prev_delay_ns,
		attempt_number, last_status, status, last_error, claimed_at, lease_until, holder)`

// lookupSQL reads the tasks holding the given keys, once createSQL has
// skipped a row in this transaction; it reads nothing otherwise.
const lookupSQL = `SELECT ` + taskCols + ` FROM unnest($1::text[], $2::text[]) AS v(tenant, key)` + keyLookup + `
	WHERE current_setting('retrykit.create_skipped', true) = 'y'`

// notifyMax is the longest payload NOTIFY accepts: PostgreSQL wants it
// shorter than 8000 bytes.
const notifyMax = 7999

// runCreate sends every segment's createSQL and then lookupSQL in one
// batch, which PostgreSQL runs as one implicit transaction: one round trip
// (two the first time a connection prepares them), one commit.
func (s *Store) runCreate(ctx context.Context, p *createPlan) error {
	b := &pgx.Batch{}
	for _, seg := range p.segments {
		b.Queue(createSQL, p.segmentArgs(seg, s.channel)...)
	}
	var tenants, keys []string
	looked := map[taskKey]bool{}
	for _, seg := range p.segments {
		for _, i := range seg {
			if k := keyOf(&p.ts[i]); !looked[k] {
				looked[k] = true
				tenants, keys = append(tenants, k.tenant), append(keys, k.key)
			}
		}
	}
	b.Queue(lookupSQL, tenants, keys)
	br := s.pool.SendBatch(ctx, b)
	if err := p.read(br); err != nil {
		_ = br.Close()
		return err
	}
	return br.Close() // reports a failed commit
}

// segmentArgs are createSQL's arguments for the items seg.
func (p *createPlan) segmentArgs(seg []int, channel string) []any {
	n := len(seg)
	var (
		ids, tenants, keys, hashes = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		policies, methods, urls    = make([]string, n), make([]string, n), make([]string, n)
		headers, notes, bodies     = make([]string, n), make([]string, n), make([][]byte, n)
		binary                     = make([]bool, n)
		refs, sizes, hosts         = make([]string, n), make([]int64, n), make([]string, n)
		created, next, budget      = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		leases                     = make([]pgtype.Timestamptz, n)
	)
	// Notes are cut into chunks as if every item were inserted: the
	// chunks of those that are cannot be longer.
	chunks, chunk, used := make([]int32, n), int32(0), -1 // used counts a newline before each note
	for k, i := range seg {
		t := &p.ts[i]
		ids[k], tenants[k], keys[k], hashes[k] = t.ID, t.Tenant, t.IdempotencyKey, t.RequestHash
		policies[k], methods[k], urls[k] = t.PolicyID, t.Method, t.TargetURL
		headers[k], notes[k], bodies[k], binary[k] = p.headers[i], p.notes[i], t.Body, t.BodyBinary
		refs[k], sizes[k], hosts[k] = t.BodyRef, t.BodySize, targethost.Of(t.TargetURL)
		if bodies[k] == nil {
			bodies[k] = []byte{} // the column is NOT NULL
		}
		// CreateDefaults has set every time.
		created[k], next[k] = t.CreatedAt.Truncate(time.Millisecond), t.NextAttemptAt.Truncate(time.Millisecond)
		budget[k] = t.BudgetStart.Truncate(time.Millisecond)
		leases[k] = leaseOf(t)
		if used >= 0 && used+1+len(notes[k]) > notifyMax {
			chunk, used = chunk+1, -1
		}
		chunks[k], used = chunk, used+1+len(notes[k])
	}
	return []any{ids, tenants, keys, hashes, policies, methods, urls, headers, bodies, binary, created, next,
		budget, notes, chunks, channel, n, refs, sizes, hosts, leases, optText(p.instance)}
}

// read takes the answers of runCreate's statements from br.
func (p *createPlan) read(br pgx.BatchResults) error {
	for _, seg := range p.segments {
		var made []int64
		if err := br.QueryRow().Scan(&made, nil, nil); err != nil {
			return err
		}
		for _, o := range made {
			i := seg[o-1]
			p.inserted[i], p.holder[keyOf(&p.ts[i])] = true, i
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		t, _, err := scanTask(rows)
		if err != nil {
			return err
		}
		if _, ours := p.holder[keyOf(t)]; !ours {
			p.existing[keyOf(t)] = t
		}
	}
	return rows.Err()
}

// createOneSQL inserts one task unless its ID or key is taken, in which
// case it returns no row and writes nothing; it sends the task's note
// unless it is created claimed ($19, the lease, not NULL).
var createOneSQL = `WITH ins AS (
	INSERT INTO retry_tasks (id, tenant, idempotency_key, request_hash, policy_id, state, method, target_url,
		headers, body, body_binary, created_at, body_ref, body_size, target_host)
	VALUES ($1, $2, $3, $4, $5, 'LIVE', $6, $7, $8, $9, $10, $11, $16, $17, $18)
	ON CONFLICT DO NOTHING RETURNING seq, tenant
), made AS (
	SELECT seq, tenant, $11::timestamptz AS created_at, $12::timestamptz AS next_at, $13::timestamptz AS budget_start,
		$19::timestamptz AS lease, CASE WHEN $19::timestamptz IS NULL THEN 'PENDING' ELSE 'IN_FLIGHT' END AS status
	FROM ins
), run AS (
	INSERT INTO retry_runs ` + runCols + `
	SELECT seq, ` + claimedRun("$20") + ` FROM made
), moves AS (SELECT NULL::text AS from_s, status AS to_s, tenant FROM made),
` + countsCTE + `
SELECT ins.seq FROM ins LEFT JOIN LATERAL (SELECT pg_notify($14, $15) WHERE $19::timestamptz IS NULL) n ON true`

// createOne creates the one item of p to insert. When the insert is
// skipped, nothing was written, so the task holding the key can be read by
// a statement of its own, which sees a concurrent insert that ON CONFLICT
// waited for.
func (s *Store) createOne(ctx context.Context, p *createPlan) error {
	i := p.segments[0][0]
	t := &p.ts[i]
	body := t.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL
	}
	var seq int64
	err := s.pool.QueryRow(ctx, createOneSQL, t.ID, t.Tenant, t.IdempotencyKey, t.RequestHash, t.PolicyID,
		t.Method, t.TargetURL, p.headers[i], body, t.BodyBinary, ts(t.CreatedAt), ts(t.NextAttemptAt),
		ts(t.BudgetStart), s.channel, p.notes[i], t.BodyRef, t.BodySize, targethost.Of(t.TargetURL), leaseOf(t),
		optText(p.instance)).Scan(&seq)
	if err == nil {
		p.inserted[i], p.holder[keyOf(t)] = true, i
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	held, _, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskCols+` FROM (SELECT $1::text, $2::text) AS v(tenant, key)`+
		keyLookup, t.Tenant, t.IdempotencyKey))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	default:
		p.existing[keyOf(held)] = held
	}
	return nil
}

// leaseOf is new task t's lease as a parameter: NULL unless it is to be
// created claimed.
func leaseOf(t *store.Task) pgtype.Timestamptz {
	if !t.ClaimAtCreate() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t.LeaseUntil.Truncate(time.Millisecond), Valid: true}
}

// optText is s as a parameter, NULL when empty.
func optText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }
