package retryhttp

import (
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Defaults of a Transport whose Policy leaves these fields zero.
const (
	// DefaultMaxAttempts caps the attempts of one request, the first included.
	DefaultMaxAttempts = 4
	// DefaultBudget caps the time from the first attempt to the end of the
	// last one.
	DefaultBudget = 30 * time.Second
	// DefaultBaseDelay is the raw delay before the first retry.
	DefaultBaseDelay = 100 * time.Millisecond
	// DefaultMaxDelay caps every delay, a server's Retry-After included.
	DefaultMaxDelay = 10 * time.Second
	// DefaultMaxDrain is how many bytes of a discarded response body are read
	// so that its connection can be reused; a longer body costs the
	// connection instead.
	DefaultMaxDrain = 64 << 10
)

// IdempotencyKeyHeader is the header that makes a POST or PATCH retryable and
// that Transport.AddIdempotencyKey fills in.
const IdempotencyKeyHeader = "Idempotency-Key"

// DefaultBackoff returns the backoff of a Transport whose Policy has a zero
// Backoff: exponential from DefaultBaseDelay, doubling, capped at
// DefaultMaxDelay, full jitter.
func DefaultBackoff() backoff.Policy {
	return backoff.Policy{
		Kind:       backoff.Exponential,
		Base:       DefaultBaseDelay,
		Multiplier: backoff.DefaultMultiplier,
		Max:        DefaultMaxDelay,
		Jitter:     backoff.FullJitter,
	}
}

// DefaultPolicy returns the policy of a Transport with a zero Policy:
// DefaultBackoff, DefaultMaxAttempts, DefaultBudget and the default
// retryable statuses (retry.DefaultRetryableStatusCodes).
func DefaultPolicy() retry.Policy {
	return retry.Policy{Backoff: DefaultBackoff(), MaxAttempts: DefaultMaxAttempts, Budget: DefaultBudget}
}

// DefaultMethods returns the methods retried without an Idempotency-Key: the
// idempotent ones, GET, HEAD, OPTIONS, PUT, DELETE and TRACE. Each call
// returns a new slice.
func DefaultMethods() []string {
	return []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, http.MethodTrace}
}

// Transport is an http.RoundTripper that retries the requests it may safely
// send again, by a retry.Policy. The zero Transport is ready to use and safe:
// it sends through http.DefaultTransport with DefaultPolicy.
//
// A request is retried when its method is one of Methods or it carries an
// Idempotency-Key header, and its body can be sent again: it has none, or
// GetBody is set (http.NewRequest sets it for *bytes.Buffer, *bytes.Reader
// and *strings.Reader bodies). Any other request — a POST with neither key
// nor opt-in, or a body without GetBody — is sent exactly once (within
// AttemptTimeout, if set), and Base's response and error come back as they
// are.
//
// An attempt is retried when it fails to get a response for a passing reason
// (see TransportError) or gets a status among the Policy's
// RetryableStatusCodes (see StatusError); 400, 401, 403, 404, 409, 422 and
// every status outside that set are final. A Retry-After header, in seconds
// or as a date, sets the least wait, capped at the backoff's Max; when it
// would end past the Policy's Budget, RoundTrip returns that response at once.
//
// When the last attempt got a response, retryable status or not, RoundTrip
// returns it untouched, body unread, with a nil error, as http.Client would
// without retries. Otherwise it returns a *retry.Error that wraps the last
// TransportError and tells why it stopped. Each response it discards is
// drained (up to MaxDrain bytes) and closed, so its connection is reused.
//
// The request's context ends everything at once, a wait included. Each
// attempt is visible through the Policy's Observer and Logger; the
// Logger's records carry the method and the URL (password redacted).
//
// A Transport is safe for concurrent use; do not change its fields once it
// is in use.
type Transport struct {
	// Base sends each attempt; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Policy says how often and how long to retry. Its zero Backoff,
	// MaxAttempts and Budget take DefaultBackoff, DefaultMaxAttempts and
	// DefaultBudget (so every request has a time budget); its other fields
	// keep their meaning in package retry.
	Policy retry.Policy
	// Methods lists the methods retried without an Idempotency-Key; nil means
	// DefaultMethods. Add POST or PATCH to opt in to retrying them always.
	Methods []string
	// AddIdempotencyKey gives every request of an unsafe method (neither GET,
	// HEAD, OPTIONS nor TRACE) that has no Idempotency-Key header one holding
	// a new random UUID, the same on each of its attempts. The caller's
	// request is not modified: the header goes on a clone.
	AddIdempotencyKey bool
	// AttemptTimeout, when positive, limits each attempt's wait for the
	// response headers; a timed-out attempt is retried like a connection
	// failure. It uses the real clock, not Policy.Clock. Reading the final
	// response's body is bounded by the request's context only; with a
	// timeout set, that body is wrapped so that closing it releases the
	// attempt's context.
	AttemptTimeout time.Duration
	// MaxDrain is how many bytes of a discarded response body are read before
	// it is closed; 0 means DefaultMaxDrain and a negative value means none.
	MaxDrain int64
	// Limiters, when set, gives each host (the request URL's host:port, as
	// written) a retry.Limiter of its own: every attempt of a request that
	// may be retried waits for its host's limiter, and the host's 429s,
	// 503s, refused connections and timeouts slow all requests to it down
	// (see retry.Limiter). nil means no limiter, unless Policy.Limiter is
	// set: that one is shared by every host, and wins.
	Limiters *retry.Limiters
}

// NewClient returns an *http.Client that retries by p through a Transport
// over http.DefaultTransport (zero fields of p take the Transport's
// defaults). For the other options, set up a Transport and an http.Client
// yourself.
func NewClient(p retry.Policy) *http.Client {
	return &http.Client{Transport: &Transport{Policy: p}}
}

// RoundTrip sends req, again as the Transport's policy allows, and returns
// the last response or error as the Transport's documentation says.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.AddIdempotencyKey && !safe(req.Method) && req.Header.Get(IdempotencyKeyHeader) == "" {
		// A RoundTripper must not modify its request, so the key goes on a
		// clone, made once per request: every attempt reuses it.
		req = req.Clone(req.Context())
		req.Header.Set(IdempotencyKeyHeader, retry.NewIdempotencyKey())
	}
	c := &call{t: t, req: req, base: t.Base}
	if c.base == nil {
		c.base = http.DefaultTransport
	}
	if !t.retryable(req) {
		return c.once()
	}
	return c.run()
}

// CloseIdleConnections closes the idle connections of Base, when it has a
// CloseIdleConnections method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// policy returns t.Policy with its zero fields set to the defaults.
func (t *Transport) policy() retry.Policy {
	p := t.Policy
	if p.Backoff.IsZero() {
		p.Backoff = DefaultBackoff()
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Budget == 0 {
		p.Budget = DefaultBudget
	}
	return p
}

// retryable reports whether req may be sent more than once.
func (t *Transport) retryable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	if req.Header.Get(IdempotencyKeyHeader) != "" {
		return true
	}
	m := req.Method
	if m == "" {
		m = http.MethodGet
	}
	if t.Methods != nil {
		return slices.Contains(t.Methods, m)
	}
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, http.MethodTrace:
		return true
	}
	return false
}

func (t *Transport) maxDrain() int64 {
	if t.MaxDrain == 0 {
		return DefaultMaxDrain
	}
	return t.MaxDrain
}

// safe reports whether the method is safe in RFC 9110's sense: it changes
// nothing on the server, so it needs no idempotency key.
func safe(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// logger returns l with the request's method and redacted URL attached.
func logger(l *slog.Logger, method, url string) *slog.Logger {
	return l.With(slog.String("method", method), slog.String("url", url))
}

var _ http.RoundTripper = (*Transport)(nil)
