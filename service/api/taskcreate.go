package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

// taskRequest is a checked task: the body of POST /retry-tasks, or one
// item of a batch.
type taskRequest struct {
	targetURL string
	method    string
	headers   map[string]string
	// body is the body held in memory, nil when there is none (or it is by
	// reference); settleBody moves one over the threshold to the blob store.
	body   []byte
	binary bool // the body came as bodyBase64
	// streamed is the body as the stream decoder read it, until settleBody
	// places it: held, or on its way to the blob store.
	streamed *bodyBuffer
	// bodyRef is the caller's bodyRef, or the reference of the body retryd
	// put in the blob store (moved).
	bodyRef  string
	moved    *blob.Blob // the body settleBody put in the blob store
	hashHead []byte     // the moved body's bytes when at most hashInlineMax, for hash
	policyID string
	// destinationID names the task's destination, "" for none; path is
	// then the task's path under its URL, or targetURL a URL under it,
	// until resolveDestination makes targetURL the destination's form.
	destinationID string
	path          string
	key           string // "" when the client sent none
	notBefore     *int64 // epoch ms; nil when the client sent none
}

// bodyValue is a body or bodyBase64 member as read: its bytes (decoded from
// base64 for bodyBase64), or, when the stream decoder read it, the
// bodyBuffer they went to.
type bodyValue struct {
	data      []byte
	buf       *bodyBuffer
	badBase64 bool // bodyBase64 is not standard base64
}

// parseTask decodes and checks a task held in memory, reporting every bad
// field. method defaults to POST. now is the time notBefore is judged
// against, rule says why a bodyRef is refused (or ""). Every item of a
// batch comes through here; POST /retry-tasks comes through decodeTask,
// which streams its body and then checks the task as this does (checkTask),
// so that the rules live in one place.
func parseTask(data []byte, now time.Time, rule func(string) string) (*taskRequest, error) {
	m, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	return checkTask(&fields{m: m}, now, rule)
}

// checkTask checks the members of a task.
func checkTask(f *fields, now time.Time, rule func(string) string) (*taskRequest, error) {
	f.unknown("targetUrl", "method", "headers", "body", "bodyBase64", "bodyRef", "policyId", "idempotencyKey", "notBefore",
		"destinationId", "path")
	req := &taskRequest{method: http.MethodPost}

	req.destinationID, _ = f.check("destinationId", false, checkDestinationID)
	_, hasTarget := f.raw("targetUrl")
	_, hasPath := f.raw("path")
	switch {
	case req.destinationID == "" && hasPath:
		f.bad("path", "needs a destinationId")
	case req.destinationID != "" && hasPath && hasTarget:
		f.bad("path", "give a path or a targetUrl under the destination's url, not both")
	case hasPath:
		req.path, _ = f.str("path")
	}
	req.targetURL, _ = f.check("targetUrl", req.destinationID == "", checkTargetURL)
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
	body, hasBody := f.body("body")
	b64, hasB64 := f.body("bodyBase64")
	_, hasRef := f.raw("bodyRef")
	switch {
	case hasRef && (hasBody || hasB64):
		f.bad("bodyRef", "give the body inline (body or bodyBase64) or by reference (bodyRef), not both")
	case hasRef:
		req.bodyRef, _ = f.check("bodyRef", false, rule)
	case hasBody && hasB64:
		f.bad("bodyBase64", "give body or bodyBase64, not both")
	case hasBody:
		req.body, req.streamed = body.data, body.buf
	case hasB64:
		if b64.badBase64 {
			f.bad("bodyBase64", "is not standard base64 (RFC 4648, with padding)")
		}
		req.body, req.streamed, req.binary = b64.data, b64.buf, true
	}
	req.policyID, _ = f.check("policyId", false, checkTaskPolicyID)
	if req.policyID == "" {
		req.policyID = store.DefaultPolicyID
	}
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

// discard gives up q's body: a Put of it in progress is aborted, and
// nothing of it is stored. It does nothing once settleBody placed it.
func (q *taskRequest) discard() {
	if q.streamed != nil {
		q.streamed.abort()
		q.streamed = nil
	}
}

// hash digests what is sent to the target, under which policy and from
// when, to tell a repeat of a request from another request reusing its
// idempotency key. encoding/json sorts map keys, so the encoding is
// canonical. Whether the body came as body or bodyBase64 does not matter:
// the bytes sent do, and so does not whether they are kept in the task's
// row or in the blob store. A body of up to hashInlineMax bytes is hashed
// whole, as it always was; a larger one as its SHA-256 ("bs"); a caller's
// bodyRef as the reference ("r"), whose object retryd does not read at
// creation. notBefore, bs and r are left out when absent, so a task stored
// before they existed keeps its hash and its repeats stay repeats. It is
// called once the body is settled.
func (q *taskRequest) hash() string { return q.hashWith(nil) }

// hashWith is hash with the headers first given to headers, when not nil:
// what keeps the digest of a request with credentials from being a way to
// test guesses of them (see server.sealTask).
func (q *taskRequest) hashWith(headers func(map[string]string) map[string]string) string {
	hs := withoutTrace(q.headers)
	if headers != nil {
		hs = headers(hs)
	}
	h := struct {
		Method     string            `json:"m"`
		URL        string            `json:"u"`
		Headers    map[string]string `json:"h"`
		Body       []byte            `json:"b"`
		BodySHA256 string            `json:"bs,omitempty"`
		BodyRef    string            `json:"r,omitempty"`
		PolicyID   string            `json:"p"`
		NotBefore  *int64            `json:"nb,omitempty"`
	}{Method: q.method, URL: q.targetURL, Headers: hs, PolicyID: q.policyID, NotBefore: q.notBefore}
	switch {
	case q.moved != nil && q.hashHead != nil:
		h.Body = q.hashHead
	case q.moved != nil:
		h.BodySHA256 = q.moved.Hex()
	case q.bodyRef != "":
		h.BodyRef = q.bodyRef
	case len(q.body) > hashInlineMax:
		sum := sha256.Sum256(q.body)
		h.BodySHA256 = hex.EncodeToString(sum[:])
	default:
		h.Body = q.body
	}
	b, _ := json.Marshal(h)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// withoutTrace returns h without its trace headers (tracing.IsHeader),
// nil when none is left: they say which span sent a request, not what it
// asks for, and a client that retries its POST sends a new span each time
// yet must get the same task back, not a conflict. h itself is returned
// when it has none, so the hash of a task without them is what it was.
func withoutTrace(h map[string]string) map[string]string {
	n := 0
	for k := range h {
		if tracing.IsHeader(k) {
			n++
		}
	}
	if n == 0 {
		return h
	}
	if n == len(h) {
		return nil
	}
	out := make(map[string]string, len(h)-n)
	for k, v := range h {
		if !tracing.IsHeader(k) {
			out[k] = v
		}
	}
	return out
}

// inheritTrace gives q the W3C trace context of the HTTP request that
// carries it (its traceparent, tracestate and baggage headers) when q has
// no traceparent of its own: the task's attempts then join the caller's
// trace, as children of the span that created the task. The headers are
// kept among the task's own, so no store keeps anything new, and each
// attempt sends a traceparent of its own in that trace (see package
// tracing). A request whose traceparent is invalid, or given more than
// once, has no trace context (W3C Trace Context: the receiver starts
// afresh); a tracestate or baggage the task gives itself is kept.
func (q *taskRequest) inheritTrace(h http.Header) {
	if _, own := tracing.Header(q.headers, tracing.Traceparent); own {
		return
	}
	parent := h.Values(tracing.Traceparent)
	if len(parent) != 1 {
		return
	}
	if _, _, _, ok := tracing.ParseTraceparent(parent[0]); !ok {
		return
	}
	if q.headers == nil {
		q.headers = make(map[string]string, 3)
	}
	q.headers[tracing.Traceparent] = parent[0]
	for _, name := range []string{tracing.Tracestate, tracing.Baggage} {
		// Several fields of these are one list (RFC 9110, 5.3).
		v := strings.Join(h.Values(name), ",")
		if _, own := tracing.Header(q.headers, name); own || v == "" || len(v) > MaxHeaderValueLength ||
			!httpguts.ValidHeaderFieldValue(v) {
			continue
		}
		q.headers[name] = v
	}
}

// traced puts the task t a request created on the request's span, if it
// is recorded: its ID, and, when t has a trace of its own (it was created
// without a trace context), a link to its first attempt's span there.
func traced(ctx context.Context, ts ...*store.Task) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if len(ts) == 1 {
		span.SetAttributes(attribute.String("retryd.task.id", ts[0].ID))
	}
	for _, t := range ts {
		if tt := tracing.Of(t.ID, t.Headers); !tt.HasParent() {
			span.AddLink(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tt.TraceID, SpanID: tracing.AttemptSpanID(t.ID, 1, t.BudgetStart), TraceFlags: tt.Flags,
			})})
		}
	}
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
		Body: q.body, BodyBinary: q.binary, PolicyID: q.policyID, BodyRef: q.bodyRef, BodySize: q.bodySize(),
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

// bodySize is the size the task records of a body by reference: a moved
// body's, or 0 for a caller's, which retryd does not read at creation.
func (q *taskRequest) bodySize() int64 {
	if q.moved != nil {
		return q.moved.Size
	}
	return 0
}

// taskCreate creates one task. Its body is streamed (decodeTask): with a
// blob store, it may be up to Config.MaxLargeBodyBytes, and one over the
// threshold goes to the blob store as it is read; the Put completes once
// the request is known to be good and its policy exists.
func (s *server) taskCreate(w http.ResponseWriter, r *http.Request, tenant string) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	limit := s.maxBody
	if s.blobs != nil {
		limit = s.maxLarge
	}
	if r.ContentLength > limit {
		return tooLarge(limit)
	}
	now := s.now()
	ctx := r.Context()
	req, err := s.decodeTask(ctx, http.MaxBytesReader(w, r.Body, limit), limit, now, s.bodyRefRule(tenant))
	if err != nil {
		return err
	}
	defer req.discard()
	if err := s.resolveDestination(ctx, tenant, req, nil); err != nil {
		return err
	}
	req.inheritTrace(r.Header)
	if known, err := s.policyKnown(ctx, tenant, req.policyID); err != nil {
		return storeError(err, "policy")
	} else if !known {
		return unknownPolicy(req.policyID)
	}
	if err := s.settleBody(ctx, req); err != nil {
		return err
	}
	nt := s.sealTask(req, req.newTask(tenant, now))
	reserved := s.claimAtCreate([]*store.Task{nt})
	t, created, err := s.store.TaskCreate(createCtx(ctx, reserved), nt)
	if created {
		s.handOver(t, &reserved)
	}
	s.settle(reserved, err, []*store.Task{nt})
	status, err := createAnswer(created, err, nt.IdempotencyKey)
	if err != nil {
		return err
	}
	if created {
		traced(ctx, t)
	}
	s.writeJSON(w, status, taskJSON(t))
	return nil
}

// sealTask seals the credential headers of t, the task q makes. Its
// request hash then takes each such header's keyed digest (Keyring.HMAC)
// for its value: a plain hash of a request whose every other part the
// task's row holds would let a weak password be guessed offline. A repeat
// of the request is still a repeat, while the key stays the same.
func (s *server) sealTask(q *taskRequest, t *store.Task) *store.Task {
	if s.keys == nil {
		return t
	}
	if !destination.HasSecretHeader(t.Headers, s.sealed) {
		return t
	}
	t.RequestHash = q.hashWith(func(h map[string]string) map[string]string {
		return destination.DigestHeaders(s.keys.HMAC, h, s.sealed)
	})
	t.Headers = destination.SealHeaders(s.keys, t.Tenant, t.ID, t.Headers, s.sealed)
	return t
}
