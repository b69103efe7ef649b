package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/targethost"
)

// CreatesClaimed marks the Store as a store.CreateClaimer: taskRow writes
// the tasks that ask for it claimed.
func (s *Store) CreatesClaimed() {}

var _ store.CreateClaimer = (*Store)(nil)

// createCall is one TaskCreateBatch call on its way through the writer:
// its items with their encoded headers, those refused before the
// transaction (refused[i] says why), and, once written, the results.
type createCall struct {
	ts      []store.Task
	headers []string
	refused []error
	res     []store.CreateResult
}

// createMerged creates the items of the create ops of a batch, in order,
// with one createAll, as if each call came after the one before it. The
// writer may run it again in a new transaction (see runBatch): it starts
// afresh each time.
func createMerged(w *wtx, ops []*writeOp) error {
	if len(ops) == 1 { // a batch call alone: nothing to merge, nor to copy
		c := ops[0].create
		c.res = make([]store.CreateResult, len(c.ts))
		return w.createAll(c.ts, c.headers, c.refused, c.res)
	}
	var all createCall
	for _, op := range ops {
		c := op.create
		all.ts, all.headers = append(all.ts, c.ts...), append(all.headers, c.headers...)
		all.refused = append(all.refused, c.refused...)
	}
	all.res = make([]store.CreateResult, len(all.ts))
	if err := w.createAll(all.ts, all.headers, all.refused, all.res); err != nil {
		return err
	}
	n := 0
	for _, op := range ops {
		c := op.create
		c.res, n = all.res[n:n+len(c.ts):n+len(c.ts)], n+len(c.ts)
	}
	return nil
}

// createAll creates the items of ts not refused (refused[i] says why),
// setting res as create would one item after another. A batch whose items
// all have distinct IDs and keys, the usual case, is inserted with two
// bulk statements: an item that inserts nothing then conflicts with a task
// stored before the batch, and is explained as create would. A batch that
// repeats an ID or a key goes one item at a time, each seeing those before
// it. (Per item, the two statements of create took about two fifths of the
// writer's time in batch creates; see docs/BENCHMARKS.md.)
func (w *wtx) createAll(ts []store.Task, headers []string, refused []error, res []store.CreateResult) error {
	var items []int
	ids, keys := map[string]bool{}, map[[2]string]bool{}
	distinct := true
	for i := range ts {
		if refused[i] != nil {
			res[i].Err = refused[i]
			continue
		}
		t := &ts[i]
		k := [2]string{t.Tenant, t.IdempotencyKey}
		distinct = distinct && !ids[t.ID] && !keys[k]
		ids[t.ID], keys[k] = true, true
		items = append(items, i)
	}
	if !distinct || len(items) < 2 {
		for _, i := range items {
			stored, err := w.create(&ts[i], headers[i])
			if err := w.setResult(&res[i], &ts[i], stored, err); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]any, len(items))
	for k, i := range items {
		rows[k] = taskRow(&ts[i])
	}
	seqs := make(map[string]int64, len(items))
	if err := w.bulk(createBulkSQL, createRow, rows, func(r *sql.Rows) error {
		defer r.Close()
		for r.Next() {
			var seq int64
			var id string
			if err := r.Scan(&seq, &id); err != nil {
				return err
			}
			seqs[id] = seq
		}
		return r.Err()
	}); err != nil {
		return err
	}
	var payloads [][]any
	for _, i := range items {
		t := &ts[i]
		seq, ok := seqs[t.ID]
		if !ok {
			stored, err := w.taken(t)
			if err := w.setResult(&res[i], t, stored, err); err != nil {
				return err
			}
			continue
		}
		payloads = append(payloads, payloadRow(seq, t, headers[i]))
		w.inserted(&res[i], t)
	}
	return w.bulk(payloadInsertSQL+"%s", payloadRowSQL, payloads, nil)
}

// setResult sets res for item t from what create (or taken) said: stored nil
// and no error when t was inserted. An error other than a conflict is the
// transaction's, returned.
func (w *wtx) setResult(res *store.CreateResult, t, stored *store.Task, err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		res.Err = fmt.Errorf("sqlite: create task: %w", err)
	case err != nil:
		return err
	case stored == nil:
		w.inserted(res, t)
	default:
		res.Task = stored
	}
	return nil
}

// inserted answers res for t, just inserted, and counts it in its state.
func (w *wtx) inserted(res *store.CreateResult, t *store.Task) {
	res.Task, res.Created = store.CreatedBy(t, ""), true
	w.move(t.Tenant, "", res.Task.Status)
}

// The columns of a new task's row, and its payload's: create inserts one
// of each, createAll many (see bulk).
const (
	taskInsertSQL = `INSERT INTO tasks (id, tenant, idempotency_key, request_hash, policy_id, state, status,
		wake_at, attempt_number, next_attempt_at, prev_delay_ns, budget_start, last_error, last_status, lease_until,
		claimed_at, version, log_count, created_at, updated_at, finished_at, target_host) VALUES `
	createRow        = `(?, ?, ?, ?, ?, 'LIVE', ?, ?, ?, ?, 0, ?, '', 0, ?, ?, ?, 0, ?, ?, 0, ?)`
	createBulkSQL    = taskInsertSQL + `%s ON CONFLICT DO NOTHING RETURNING seq, id`
	payloadInsertSQL = `INSERT INTO task_payloads (task_seq, target_url, method, headers, body, body_binary,
		body_ref, body_size) VALUES `
	payloadRowSQL = `(?, ?, ?, ?, ?, ?, ?, ?)`
)

// taskRow is the values createRow binds for t: PENDING, or claimed as
// TaskClaim at its creation would leave it (store.Task.ClaimAtCreate).
func taskRow(t *store.Task) []any {
	next, created := epochms.Of(t.NextAttemptAt), epochms.Of(t.CreatedAt)
	status, wake, attempt, lease, claimed, version := string(store.Pending), next, 0, int64(0), int64(0), 1
	if t.ClaimAtCreate() {
		lease = epochms.Of(t.LeaseUntil)
		status, wake, attempt, claimed, version = string(store.InFlight), lease, 1, created, 2
	}
	return []any{t.ID, t.Tenant, t.IdempotencyKey, t.RequestHash, t.PolicyID, status, wake, attempt, next,
		epochms.Of(t.BudgetStart), lease, claimed, version, created, created, targethost.Of(t.TargetURL)}
}

// payloadRow is the values payloadRowSQL binds for t, stored as seq.
func payloadRow(seq int64, t *store.Task, headers string) []any {
	body := t.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL
	}
	return []any{seq, t.TargetURL, t.Method, headers, body, t.BodyBinary, t.BodyRef, t.BodySize}
}

// create inserts t, returning nil (setResult answers and counts it), or
// the task its idempotency key already names, or ErrConflict. The insert
// is tried first, since a new key is the common case: a taken key or ID
// makes it insert nothing, and only then is the stored task looked up.
func (w *wtx) create(t *store.Task, headers string) (*store.Task, error) {
	var seq int64
	err := w.queryRow(taskInsertSQL+createRow+` ON CONFLICT DO NOTHING RETURNING seq`, taskRow(t)...).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return w.taken(t)
	}
	if err != nil {
		return nil, err
	}
	if _, err := w.exec(payloadInsertSQL+payloadRowSQL, payloadRow(seq, t, headers)...); err != nil {
		return nil, err
	}
	return nil, nil
}

// taken explains why t could not be inserted: its idempotency key names a
// task (the same request: that task; another: ErrConflict), or its ID is
// another task's.
func (w *wtx) taken(t *store.Task) (*store.Task, error) {
	var seq int64
	var hash string
	err := w.queryRow(`SELECT seq, request_hash FROM tasks WHERE tenant = ? AND idempotency_key = ?`,
		t.Tenant, t.IdempotencyKey).Scan(&seq, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("task id %s is taken: %w", t.ID, store.ErrConflict)
	case err != nil:
		return nil, err
	case hash != t.RequestHash:
		return nil, fmt.Errorf("idempotency key %q names another request: %w", t.IdempotencyKey, store.ErrConflict)
	}
	return w.taskBySeq(seq)
}
