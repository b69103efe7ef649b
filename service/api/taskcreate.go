package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/retrykit/retry/service/store"
)

// taskRequest is a checked POST /retry-tasks body.
type taskRequest struct {
	targetURL string
	method    string
	headers   map[string]string
	body      []byte
	binary    bool // the body came as bodyBase64
	policyID  string
	key       string // "" when the client sent none
}

// parseTask decodes and checks a task creation body, reporting every bad
// field. method defaults to POST.
func parseTask(data []byte) (*taskRequest, error) {
	m, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	f := &fields{m: m}
	f.unknown("targetUrl", "method", "headers", "body", "bodyBase64", "policyId", "idempotencyKey")
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
	if err := f.err(); err != nil {
		return nil, err
	}
	return req, nil
}

// hash digests what is sent to the target and under which policy, to tell
// a repeat of a request from another request reusing its idempotency key.
// encoding/json sorts map keys, so the encoding is canonical. Whether the
// body came as body or bodyBase64 does not matter: the bytes sent do.
func (q *taskRequest) hash() string {
	b, _ := json.Marshal(struct {
		Method   string            `json:"m"`
		URL      string            `json:"u"`
		Headers  map[string]string `json:"h"`
		Body     []byte            `json:"b"`
		PolicyID string            `json:"p"`
	}{q.method, q.targetURL, q.headers, q.body, q.policyID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s *server) taskCreate(w http.ResponseWriter, r *http.Request, tenant string) error {
	data, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := parseTask(data)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := s.store.PolicyGet(ctx, tenant, req.policyID); errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusBadRequest, CodeUnknownPolicy, "policyId", "no policy %q is registered; POST /retry-policies first", req.policyID)
	} else if err != nil {
		return storeError(err, "policy")
	}
	key := req.key
	if key == "" {
		key = uuid.NewString()
	}
	now := s.now()
	t, created, err := s.store.TaskCreate(ctx, &store.Task{
		ID: uuid.NewString(), Tenant: tenant, IdempotencyKey: key, RequestHash: req.hash(),
		TargetURL: req.targetURL, Method: req.method, Headers: req.headers,
		Body: req.body, BodyBinary: req.binary, PolicyID: req.policyID,
		Status: store.Pending, NextAttemptAt: now, BudgetStart: now, CreatedAt: now, UpdatedAt: now,
	})
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, CodeConflict, "idempotencyKey",
			"idempotencyKey %q is already used by a different request", key)
	}
	if err != nil {
		return storeError(err, "task")
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.wake(t)
	}
	s.writeJSON(w, status, taskJSON(t))
	return nil
}
