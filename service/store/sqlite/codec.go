package sqlite

import (
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/headerjson"
)

// Times are stored as epoch milliseconds (package epochms), headers as a
// JSON object (package headerjson).

// hotCols are the tasks columns scanHot reads, in its order.
const hotCols = `seq, id, tenant, idempotency_key, request_hash, policy_id, status, attempt_number,
	next_attempt_at, prev_delay_ns, budget_start, last_error, last_status, lease_until, version,
	created_at, updated_at, finished_at`

// payloadCols are the task_payloads columns scanPayload reads, in its order.
const payloadCols = `target_url, method, headers, body, body_binary, body_ref, body_size`

// taskSelect reads whole tasks; callers add WHERE, ORDER BY and LIMIT.
const taskSelect = `SELECT t.seq, t.id, t.tenant, t.idempotency_key, t.request_hash, t.policy_id, t.status,
	t.attempt_number, t.next_attempt_at, t.prev_delay_ns, t.budget_start, t.last_error, t.last_status,
	t.lease_until, t.version, t.created_at, t.updated_at, t.finished_at,
	p.target_url, p.method, p.headers, p.body, p.body_binary, p.body_ref, p.body_size
	FROM tasks t JOIN task_payloads p ON p.task_seq = t.seq`

type scanner interface{ Scan(dest ...any) error }

// row receives n columns as the driver hands them over: database/sql
// stores into an *any as is, where an *int, a named string type or a
// *[]byte destination costs a conversion through reflection or strconv,
// or a copy, per column.
type row []any

// dest returns scan destinations for r.
func (r row) dest() []any {
	d := make([]any, len(r))
	for i := range r {
		d[i] = &r[i]
	}
	return d
}

func (r row) str(i int) string {
	switch v := r[i].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func (r row) int(i int) int64 {
	switch v := r[i].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0
}

func (r row) bytes(i int) []byte {
	switch v := r[i].(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	}
	return []byte{}
}

// hotLen is the number of hotCols.
const hotLen = 18

// hot decodes r[off:off+hotLen], a row of hotCols, into a task and its seq.
func (r row) hot(off int) (*store.Task, int64) {
	h := r[off : off+hotLen]
	return &store.Task{
		ID: h.str(1), Tenant: h.str(2), IdempotencyKey: h.str(3), RequestHash: h.str(4), PolicyID: h.str(5),
		Status: store.Status(h.str(6)), AttemptNumber: int(h.int(7)), NextAttemptAt: epochms.Time(h.int(8)),
		PrevDelay: time.Duration(h.int(9)), BudgetStart: epochms.Time(h.int(10)), LastError: h.str(11),
		LastStatus: int(h.int(12)), LeaseUntil: epochms.Time(h.int(13)), Version: h.int(14),
		CreatedAt: epochms.Time(h.int(15)), UpdatedAt: epochms.Time(h.int(16)), FinishedAt: epochms.Time(h.int(17)),
	}, h.int(0)
}

// payload is a task's request as task_payloads keeps it.
type payload struct {
	url, method, headers string
	body                 []byte
	binary               bool
	ref                  string
	size                 int64
}

// payloadLen is the number of payloadCols.
const payloadLen = 7

// payload decodes r[off:off+payloadLen], a row of payloadCols.
func (r row) payload(off int) payload {
	p := r[off : off+payloadLen]
	return payload{url: p.str(0), method: p.str(1), headers: p.str(2), body: p.bytes(3), binary: p.int(4) != 0,
		ref: p.str(5), size: p.int(6)}
}

func (p *payload) apply(t *store.Task) error {
	t.TargetURL, t.Method, t.Body, t.BodyBinary = p.url, p.method, p.body, p.binary
	t.BodyRef, t.BodySize = p.ref, p.size
	if p.ref == "" {
		t.BodySize = int64(len(p.body)) // rows older than body_size hold 0
	}
	var err error
	if t.Headers, err = headerjson.Decode([]byte(p.headers)); err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	return nil
}

// scanTask reads one row of taskSelect.
func scanTask(sc scanner) (*store.Task, int64, error) {
	r := make(row, hotLen+payloadLen)
	if err := sc.Scan(r.dest()...); err != nil {
		return nil, 0, err
	}
	t, seq := r.hot(0)
	p := r.payload(hotLen)
	if err := p.apply(t); err != nil {
		return nil, 0, err
	}
	return t, seq, nil
}
