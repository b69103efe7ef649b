package sqlite

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Times are stored as epoch milliseconds, 0 for the zero time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// hotCols are the tasks columns scanHot reads, in its order.
const hotCols = `seq, id, tenant, idempotency_key, request_hash, policy_id, status, attempt_number,
	next_attempt_at, prev_delay_ns, budget_start, last_error, last_status, lease_until, version,
	created_at, updated_at, finished_at`

// payloadCols are the task_payloads columns scanPayload reads, in its order.
const payloadCols = `target_url, method, headers, body, body_binary`

// taskSelect reads whole tasks; callers add WHERE, ORDER BY and LIMIT.
const taskSelect = `SELECT t.seq, t.id, t.tenant, t.idempotency_key, t.request_hash, t.policy_id, t.status,
	t.attempt_number, t.next_attempt_at, t.prev_delay_ns, t.budget_start, t.last_error, t.last_status,
	t.lease_until, t.version, t.created_at, t.updated_at, t.finished_at,
	p.target_url, p.method, p.headers, p.body, p.body_binary
	FROM tasks t JOIN task_payloads p ON p.task_seq = t.seq`

type scanner interface{ Scan(dest ...any) error }

// hotFields are the scan targets of hotCols for t.
func hotFields(t *store.Task, seq *int64, r *rawTimes) []any {
	return []any{seq, &t.ID, &t.Tenant, &t.IdempotencyKey, &t.RequestHash, &t.PolicyID, &t.Status,
		&t.AttemptNumber, &r.next, &r.prevDelay, &r.budget, &t.LastError, &t.LastStatus, &r.lease,
		&t.Version, &r.created, &r.updated, &r.finished}
}

type rawTimes struct {
	next, prevDelay, budget, lease, created, updated, finished int64
}

func (r *rawTimes) apply(t *store.Task) {
	t.NextAttemptAt = fromMs(r.next)
	t.PrevDelay = time.Duration(r.prevDelay)
	t.BudgetStart = fromMs(r.budget)
	t.LeaseUntil = fromMs(r.lease)
	t.CreatedAt = fromMs(r.created)
	t.UpdatedAt = fromMs(r.updated)
	t.FinishedAt = fromMs(r.finished)
}

// payload is a task's request as task_payloads keeps it.
type payload struct {
	url, method, headers string
	body                 []byte
	binary               bool
}

func (p *payload) fields() []any {
	return []any{&p.url, &p.method, &p.headers, &p.body, &p.binary}
}

func (p *payload) apply(t *store.Task) error {
	t.TargetURL, t.Method, t.Body, t.BodyBinary = p.url, p.method, p.body, p.binary
	t.Headers = nil
	if p.headers != "" && p.headers != "{}" {
		if err := json.Unmarshal([]byte(p.headers), &t.Headers); err != nil {
			return fmt.Errorf("task %s headers: %w", t.ID, err)
		}
	}
	return nil
}

// scanTask reads one row of taskSelect.
func scanTask(sc scanner) (*store.Task, int64, error) {
	t := &store.Task{}
	var seq int64
	var r rawTimes
	var p payload
	if err := sc.Scan(append(hotFields(t, &seq, &r), p.fields()...)...); err != nil {
		return nil, 0, err
	}
	r.apply(t)
	if err := p.apply(t); err != nil {
		return nil, 0, err
	}
	return t, seq, nil
}

func encodeHeaders(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("headers: %w", err)
	}
	return string(b), nil
}
