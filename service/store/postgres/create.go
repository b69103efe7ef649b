package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrykit/retry/service/store"
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
const createSQL = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::bytea[], $10::bool[], $11::timestamptz[], $12::timestamptz[], $13::timestamptz[],
		$14::text[], $15::int[]) WITH ORDINALITY
	AS v(id, tenant, key, hash, policy_id, method, target_url, headers, body, body_binary, created_at, next_at,
		budget_start, note, chunk, o)
), ins AS (
	INSERT INTO retry_tasks (id, tenant, idempotency_key, request_hash, policy_id, state, method, target_url,
		headers, body, body_binary, created_at)
	SELECT id, tenant, key, hash, policy_id, 'LIVE', method, target_url, headers::json, body, body_binary,
		created_at FROM v ORDER BY o
	ON CONFLICT DO NOTHING RETURNING seq, id
), made AS (
	SELECT ins.seq, v.o, v.next_at, v.budget_start, v.created_at, v.note, v.chunk FROM ins JOIN v ON v.id = ins.id
), run AS (
	INSERT INTO retry_runs (task_seq, version, wake_at, next_attempt_at, budget_start, updated_at, prev_delay_ns,
		attempt_number, last_status, status, last_error)
	SELECT seq, 1, next_at, next_at, budget_start, created_at, 0, 0, 0, 'PENDING', ''::bytea FROM made
), moves AS (SELECT NULL::text AS from_s, 'PENDING'::text AS to_s FROM made),
` + countsCTE + `, notes AS (SELECT string_agg(note, E'\n') AS payload FROM made GROUP BY chunk)
SELECT array_agg(o), (SELECT count(*) FROM notes, LATERAL pg_notify($16, notes.payload)),
	CASE WHEN count(*) < $17 THEN set_config('retrykit.create_skipped', 'y', true) END
FROM made`

// lookupSQL reads the tasks holding the given keys, once createSQL has
// skipped a row in this transaction; it reads nothing otherwise.
const lookupSQL = `SELECT ` + taskCols + ` FROM unnest($1::text[], $2::text[]) AS v(tenant, key)
	JOIN retry_tasks t ON t.tenant = v.tenant AND t.idempotency_key = v.key
	JOIN retry_runs r ON r.task_seq = t.seq
	WHERE current_setting('retrykit.create_skipped', true) = 'y'`

// notifyMax is the longest payload NOTIFY accepts: PostgreSQL wants it
// shorter than 8000 bytes.
const notifyMax = 7999

// deadlockTries bounds the runs of a batch that PostgreSQL aborted to
// break a deadlock. Rows are inserted in key order, so batches sharing
// keys wait for each other without deadlocking; a cycle needs task IDs
// shared in another order, or a batch of several segments.
const deadlockTries = 3

// TaskCreateBatch creates tasks in one round trip and one commit; see
// store.Store. A task whose ID is too long for its notification (nearly
// 8000 bytes) is refused as store.ErrInvalid.
func (s *Store) TaskCreateBatch(ctx context.Context, ts []*store.Task) ([]store.CreateResult, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	p := planCreate(ts)
	for try := 1; len(p.segments) > 0; try++ {
		err := s.runCreate(ctx, p)
		if err == nil {
			break
		}
		var pe *pgconn.PgError
		if try == deadlockTries || !errors.As(err, &pe) || pe.Code != "40P01" {
			return nil, s.fail("create tasks", err)
		}
	}
	return p.results(), nil
}

// taskKey is a task's (tenant, idempotency key).
type taskKey struct{ tenant, key string }

func keyOf(t *store.Task) taskKey { return taskKey{t.Tenant, t.IdempotencyKey} }

// createPlan is a batch on its way through TaskCreateBatch.
type createPlan struct {
	ts      []store.Task // the items, with their defaults
	res     []store.CreateResult
	headers []string
	notes   []string
	// segments list the items to insert, each sorted by key (then
	// position), so that concurrent batches lock keys in one order. Items
	// sharing an ID under different keys go to different segments, run in
	// order: which of them is inserted depends on whether the earlier ones
	// were, as it would one task after another. An item repeating an
	// earlier one's ID and key is in none; results works it out.
	segments [][]int

	// What the database said, reset by each run.
	inserted []bool
	holder   map[taskKey]int         // the item whose insert took each key
	existing map[taskKey]*store.Task // the other tasks holding keys of skipped items
}

// planCreate checks and orders the items of a batch.
func planCreate(in []*store.Task) *createPlan {
	n := len(in)
	p := &createPlan{ts: make([]store.Task, n), res: make([]store.CreateResult, n), headers: make([]string, n),
		notes: make([]string, n)}
	type idKey struct {
		id string
		k  taskKey
	}
	seen := map[idKey]bool{}
	var seg []int
	segIDs := map[string]bool{}
	for i, t := range in {
		p.ts[i] = *t
		if err := p.check(i); err != nil {
			p.res[i].Err = fmt.Errorf("postgres: create task: %w", err)
			continue
		}
		t := &p.ts[i]
		ik := idKey{t.ID, keyOf(t)}
		if seen[ik] {
			continue
		}
		seen[ik] = true
		if segIDs[t.ID] {
			p.segments, seg = append(p.segments, seg), nil
			clear(segIDs)
		}
		seg, segIDs[t.ID] = append(seg, i), true
	}
	if len(seg) > 0 {
		p.segments = append(p.segments, seg)
	}
	for _, seg := range p.segments {
		slices.SortFunc(seg, func(a, b int) int {
			ta, tb := &p.ts[a], &p.ts[b]
			return cmp.Or(cmp.Compare(ta.Tenant, tb.Tenant), cmp.Compare(ta.IdempotencyKey, tb.IdempotencyKey),
				cmp.Compare(a, b))
		})
	}
	return p
}

// check fills in item i's defaults and encodings, or says why it is refused.
func (p *createPlan) check(i int) error {
	t := &p.ts[i]
	if err := t.CreateDefaults(); err != nil {
		return err
	}
	if !textOK(t.ID, t.Tenant, t.IdempotencyKey, t.RequestHash, t.PolicyID, t.Method, t.TargetURL) {
		return fmt.Errorf("a field holds a NUL byte or invalid UTF-8: %w", store.ErrInvalid)
	}
	headers, err := encodeHeaders(t.Headers)
	if err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	p.headers[i] = headers
	p.notes[i] = note(store.Due{ID: t.ID, At: t.NextAttemptAt, Version: 1})
	if len(p.notes[i]) > notifyMax {
		return fmt.Errorf("task id of %d bytes: too long to notify: %w", len(t.ID), store.ErrInvalid)
	}
	return nil
}

// runCreate sends every segment's createSQL and then lookupSQL in one
// batch, which PostgreSQL runs as one implicit transaction: one round trip
// (two the first time a connection prepares them), one commit.
func (s *Store) runCreate(ctx context.Context, p *createPlan) error {
	p.inserted, p.holder, p.existing = make([]bool, len(p.ts)), map[taskKey]int{}, map[taskKey]*store.Task{}
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
		created, next, budget      = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
	)
	// Notes are cut into chunks as if every item were inserted: the
	// chunks of those that are cannot be longer.
	chunks, chunk, used := make([]int32, n), int32(0), -1 // used counts a newline before each note
	for k, i := range seg {
		t := &p.ts[i]
		ids[k], tenants[k], keys[k], hashes[k] = t.ID, t.Tenant, t.IdempotencyKey, t.RequestHash
		policies[k], methods[k], urls[k] = t.PolicyID, t.Method, t.TargetURL
		headers[k], notes[k], bodies[k], binary[k] = p.headers[i], p.notes[i], t.Body, t.BodyBinary
		if bodies[k] == nil {
			bodies[k] = []byte{} // the column is NOT NULL
		}
		// CreateDefaults has set every time.
		created[k], next[k] = t.CreatedAt.Truncate(time.Millisecond), t.NextAttemptAt.Truncate(time.Millisecond)
		budget[k] = t.BudgetStart.Truncate(time.Millisecond)
		if used >= 0 && used+1+len(notes[k]) > notifyMax {
			chunk, used = chunk+1, -1
		}
		chunks[k], used = chunk, used+1+len(notes[k])
	}
	return []any{ids, tenants, keys, hashes, policies, methods, urls, headers, bodies, binary, created, next,
		budget, notes, chunks, channel, n}
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

// results answers each item as TaskCreate would have, one after another:
// an item not inserted is a repeat of, or conflicts with, the task that
// held its key by then; if none did, its ID was taken.
func (p *createPlan) results() []store.CreateResult {
	for i := range p.ts {
		if p.res[i].Err != nil {
			continue
		}
		t := &p.ts[i]
		if p.inserted[i] {
			p.res[i] = store.CreateResult{Task: store.Created(t), Created: true}
			continue
		}
		var held *store.Task // nil when the key was free when item i came
		if j, ours := p.holder[keyOf(t)]; ours {
			if j < i {
				held = store.Created(&p.ts[j])
			}
		} else if e, ok := p.existing[keyOf(t)]; ok {
			held = clone(e)
		}
		switch {
		case held == nil:
			p.res[i].Err = fmt.Errorf("postgres: create task: task id %s is taken: %w", t.ID, store.ErrConflict)
		case held.RequestHash != t.RequestHash:
			p.res[i].Err = fmt.Errorf("postgres: create task: idempotency key %q names another request: %w",
				t.IdempotencyKey, store.ErrConflict)
		default:
			p.res[i] = store.CreateResult{Task: held}
		}
	}
	return p.res
}

// clone returns a copy of t that shares nothing with it.
func clone(t *store.Task) *store.Task {
	c := *t
	c.Headers, c.Body = maps.Clone(t.Headers), bytes.Clone(t.Body)
	return &c
}
