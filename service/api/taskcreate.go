package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/retrykit/retry/service/store"
)

// taskRequest is a checked task: the body of POST /retry-tasks, or one
// item of a batch.
type taskRequest struct {
	targetURL string
	method    string
	headers   map[string]string
	body      []byte
	binary    bool // the body came as bodyBase64
	policyID  string
	key       string // "" when the client sent none
	notBefore *int64 // epoch ms; nil when the client sent none
}

// parseTask decodes and checks a task, reporting every bad field. method
// defaults to POST. now is the time notBefore is judged against. Both POST
// /retry-tasks and every item of its batch come through here, so that the
// rules live in one place.
func parseTask(data []byte, now time.Time) (*taskRequest, error) {
	m, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	f := &fields{m: m}
	f.unknown("targetUrl", "method", "headers", "body", "bodyBase64", "policyId", "idempotencyKey", "notBefore")
	req := &taskRequest{method: http.MethodPost}

	req.targetURL, _ = f.check("targetUrl", true, checkTargetURL)
	if m, ok := f.check("method", false, func(m string) string { _, why := checkMethod(m); return why }); ok {
		req.method, _ = checkMethod(m)
	}
	if raw, ok := f.raw("headers"); ok {
		var h map[string]string
		var why string
		if err := json.Unmarshal(raw, &h); err != nil {
			f.bad("headers", "must be an object of strings")
		} else if req.headers, why = checkHeaders(h); why != "" {
			f.bad("headers", why)
		}
	}
	body, hasBody := f.str("body")
	b64, hasB64 := f.str("bodyBase64")
	switch {
	case hasBody && hasB64:
		f.bad("bodyBase64", "give body or bodyBase64, not both")
	case hasBody:
		req.body = []byte(body)
	case hasB64:
		var err error
		if req.body, err = base64.StdEncoding.Strict().DecodeString(b64); err != nil {
			f.bad("bodyBase64", "is not standard base64 (RFC 4648, with padding)")
		}
		req.binary = true
	}
	req.policyID, _ = f.check("policyId", true, checkPolicyID)
	req.key, _ = f.check("idempotencyKey", false, checkKey)
	if raw, ok := f.raw("notBefore"); ok {
		if ms, why := checkNotBefore(raw, now); why != "" {
			f.bad("notBefore", why)
		} else {
			req.notBefore = &ms
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return req, nil
}

// hash digests what is sent to the target, under which policy and from
// when, to tell a repeat of a request from another request reusing its
// idempotency key. encoding/json sorts map keys, so the encoding is
// canonical. Whether the body came as body or bodyBase64 does not matter:
// the bytes sent do. notBefore is left out when absent, so a task stored
// before notBefore existed keeps its hash and its repeats stay repeats.
func (q *taskRequest) hash() string {
	b, _ := json.Marshal(struct {
		Method    string            `json:"m"`
		URL       string            `json:"u"`
		Headers   map[string]string `json:"h"`
		Body      []byte            `json:"b"`
		PolicyID  string            `json:"p"`
		NotBefore *int64            `json:"nb,omitempty"`
	}{q.method, q.targetURL, q.headers, q.body, q.policyID, q.notBefore})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// newTask is the one place a checked request becomes the task handed to
// the store, for POST /retry-tasks and its batch alike. The first attempt
// is due at notBefore, rounded up to the store's millisecond so that it is
// never early, or now when notBefore is absent or past. The time budget
// starts then too: a task scheduled for tomorrow is not exhausted by its
// own wait.
func (q *taskRequest) newTask(tenant string, now time.Time) *store.Task {
	key := q.key
	if key == "" {
		key = store.NewID()
	}
	due := now
	if q.notBefore != nil {
		if nb := time.UnixMilli(*q.notBefore); nb.After(now) {
			due = store.CeilMillis(nb)
		}
	}
	return &store.Task{
		ID: store.NewID(), Tenant: tenant, IdempotencyKey: key, RequestHash: q.hash(),
		TargetURL: q.targetURL, Method: q.method, Headers: q.headers,
		Body: q.body, BodyBinary: q.binary, PolicyID: q.policyID,
		Status: store.Pending, NextAttemptAt: due, BudgetStart: due, CreatedAt: now, UpdatedAt: now,
	}
}

// createAnswer turns the store's answer to one create into the status to
// answer with (201 for a new task, 200 for a repeat) or the error: 409 when
// key, the idempotency key sent, names another request.
func createAnswer(created bool, err error, key string) (int, error) {
	switch {
	case errors.Is(err, store.ErrConflict):
		return 0, errorf(http.StatusConflict, CodeConflict, "idempotencyKey",
			"idempotencyKey %q is already used by a different request", key)
	case err != nil:
		return 0, storeError(err, "task")
	case created:
		return http.StatusCreated, nil
	}
	return http.StatusOK, nil
}

func (s *server) taskCreate(w http.ResponseWriter, r *http.Request, tenant string) error {
	data, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	now := s.now()
	req, err := parseTask(data, now)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if known, err := s.policyKnown(ctx, tenant, req.policyID); err != nil {
		return storeError(err, "policy")
	} else if !known {
		return unknownPolicy(req.policyID)
	}
	nt := req.newTask(tenant, now)
	t, created, err := s.store.TaskCreate(ctx, nt)
	status, err := createAnswer(created, err, nt.IdempotencyKey)
	if err != nil {
		return err
	}
	if created {
		s.wake(t)
	}
	s.writeJSON(w, status, taskJSON(t))
	return nil
}
