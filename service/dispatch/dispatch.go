// Package dispatch makes retryd's outbound calls: one HTTP request per
// attempt, with the task's stored method, headers and body plus its
// Idempotency-Key and the headers naming its task and attempt
// (Request.TaskID), bounded in time and in what it reads, refusing addresses
// a tenant must not reach, and never following a redirect. It reports what
// happened as a Result, a target's Retrykit-Retry: never included
// (Result.NoRetry); Result.Outcome applies a retry policy to it.
//
// http:// and https:// targets take one path: HTTP/1.1 through
// github.com/valyala/fasthttp, which writes the request head, parses the
// response and keeps the connections, one pool per target host (see
// transport.go for what this package adds around it). A target sees the
// request net/http would send: the task's headers but the framing and
// connection ones, which the client sets, a User-Agent of "retryd" unless
// the task sets one, and a Content-Length when there is a body or the
// method is POST, PUT or PATCH.
//
// A body held by reference (Request.BodyRef) is read from the blob store
// (Config.Blobs) at each attempt and streamed to the target as it is read,
// never held whole: see body.go.
package dispatch

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/internal/targeturl"
)

// Defaults for the zero fields of Config.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 64 << 10
	DefaultKeepBytes        = 1024
	DefaultMaxIdlePerHost   = 256
)

// ErrBadTarget is returned (wrapped) for a URL that cannot be called: not
// http or https, no host, or unparsable. Such an attempt is not retried.
var ErrBadTarget = errors.New("bad target url")

// Config sets up a Dispatcher. Zero fields take the Default… values.
type Config struct {
	Guard Guard // which resolved addresses may be called
	// ConnectTimeout bounds name resolution and the TCP connect, and
	// separately the TLS handshake. A connect is not cut short by the
	// context Send is given (a TLS handshake is): it ends within this.
	ConnectTimeout   time.Duration
	Timeout          time.Duration // the whole attempt: connect, send, headers, body
	MaxResponseBytes int64         // read at most this much of a response body, then drop the connection
	KeepBytes        int           // the first bytes of the response kept for the attempt log
	// MaxIdlePerHost bounds the idle keep-alive connections kept per
	// target host; four times as many are kept in all.
	MaxIdlePerHost int
	TLS            *tls.Config // for https targets; nil means the system's roots
	// Blobs reads the bodies of requests that hold theirs by reference
	// (Request.BodyRef); nil means no blob store, and such a request's
	// attempt fails with an error wrapping ErrNoBlobStore.
	Blobs blob.Store
}

// Dispatcher sends attempts. It is safe for concurrent use; Close it to
// release idle connections.
type Dispatcher struct {
	cfg Config
	// dialer connects to every target; its Control runs the Guard on every
	// address it is about to connect to.
	dialer *net.Dialer
	// client keeps a fasthttp.HostClient, and its pool of connections, per
	// target host and scheme, and drops those left without connections.
	// Its Transport is this package's (see transport.go).
	client *fasthttp.Client
	// idle counts the connections waiting in the client's pools, bounded
	// by maxIdle.
	idle    atomic.Int64
	maxIdle int64
	closed  atomic.Bool
	// readBudget bounds what an attempt reads from its connection, TLS
	// records and framing included: room for a few heads of
	// maxHeadBytes, and twice MaxResponseBytes for the body and its chunk
	// framing.
	readBudget int64
	// calls holds the fasthttp request and response of an attempt with
	// what the transport needs, so that an attempt allocates neither.
	calls sync.Pool
	// bufs holds KeepBytes-long buffers for reading responses, so that an
	// attempt allocates only the bytes it keeps.
	bufs sync.Pool
	// chunks holds the buffers a body by reference is streamed through
	// (body.go).
	chunks sync.Pool
}

// New returns a Dispatcher for cfg.
func New(cfg Config) *Dispatcher {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.KeepBytes <= 0 {
		cfg.KeepBytes = DefaultKeepBytes
	}
	if cfg.MaxIdlePerHost <= 0 {
		cfg.MaxIdlePerHost = DefaultMaxIdlePerHost
	}
	guard := cfg.Guard
	d := &Dispatcher{
		cfg:        cfg,
		dialer:     &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second, Control: guard.control},
		maxIdle:    4 * int64(cfg.MaxIdlePerHost),
		readBudget: 8*maxHeadBytes + 2*cfg.MaxResponseBytes,
	}
	tlsConfig := &tls.Config{}
	if cfg.TLS != nil {
		tlsConfig = cfg.TLS.Clone()
	}
	// HTTP/1.1 only: a target offered h2 would take it, and answer in a
	// protocol the client does not speak.
	tlsConfig.NextProtos = []string{"http/1.1"}
	d.client = &fasthttp.Client{
		Transport: transport{d},
		// The dialer, not fasthttp's: it runs the guard on each address a
		// name resolves to, in both families (RFC 6555 fallback), which
		// also makes fasthttp's DialDualStack moot. TLS is left to fasthttp,
		// with this configuration and the host's name (for SNI and the
		// certificate check; never a Host header's); the transport makes
		// the handshake, under the attempt's context.
		DialTimeout: d.dial,
		TLSConfig:   tlsConfig,
		// Connections per host are not limited (MaxIdlePerHost bounds the
		// idle ones); fasthttp would otherwise fail the attempts past its
		// default of 512 at once.
		MaxConnsPerHost:     math.MaxInt32,
		MaxIdleConnDuration: idleTimeout,
		// A request is sent again only when the transport says so: once,
		// after a pooled connection the target had closed (see errStale).
		MaxIdemponentCallAttempts: 2,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, true },
		// The largest response head read; a longer one is a malformed
		// response. The buffer is taken from a pool for each attempt.
		ReadBufferSize: maxHeadBytes,
		// The target and request line as the URL has them, and the
		// User-Agent as the request sets it.
		DisablePathNormalizing:   true,
		NoDefaultUserAgentHeader: true,
		// The connection used last is used next: it is the likeliest to
		// be open still, and taking it is O(1) where FIFO copies the pool.
		ConnPoolStrategy: fasthttp.LIFO,
	}
	d.calls.New = func() any { return new(call) }
	d.chunks.New = func() any {
		b := make([]byte, chunkSize)
		return &b
	}
	d.bufs.New = func() any {
		b := make([]byte, cfg.KeepBytes)
		return &b
	}
	return d
}

const (
	// idleTimeout is how long an idle keep-alive connection is kept.
	idleTimeout = 90 * time.Second
	// maxHeadBytes bounds a response's status line and header section
	// (net/http allows 10 MiB, Node.js 16 KiB).
	maxHeadBytes = 32 << 10
)

// Timeout returns the bound on one attempt; a lease must outlast it.
func (d *Dispatcher) Timeout() time.Duration { return d.cfg.Timeout }

// Close drops idle connections. Sends in progress are not interrupted;
// their connections are closed when they end.
func (d *Dispatcher) Close() {
	d.closed.Store(true)
	d.client.CloseIdleConnections()
}

// Request is one attempt to send.
type Request struct {
	Method         string
	URL            string
	Headers        map[string]string
	Body           []byte
	IdempotencyKey string // sent as Idempotency-Key, over any stored header of that name
	// TaskID, when not empty, tells the target which task and attempt
	// this is, so that it can tell a retry from a new request and log
	// both alike: it is sent as Retrykit-Task-Id, Attempt as
	// Retrykit-Attempt and FirstAttemptAt as Retrykit-First-Attempt-At
	// (epoch milliseconds), each over any stored header of its name and
	// any Extra one, as Idempotency-Key is. Empty, none of the three is
	// sent (a destination switched them off), and a stored header of one
	// of these names goes as it is.
	TaskID         string
	Attempt        int
	FirstAttemptAt time.Time
	// BodyRef, when not empty, names the body in Config.Blobs instead of
	// Body, which must then be empty. It is opened at each attempt and
	// streamed; its Content-Length is the size Open gives then.
	BodyRef string
	// Trace, when valid, is sent as the traceparent header, over any
	// stored header of that name (a task's Traceparent is its caller's
	// span; each attempt is a child of it, a span of its own). The task's
	// Tracestate and Baggage headers go as they are.
	Trace Trace
	// Sign, when set, signs the attempt as it is sent: it reads the body
	// (a body by reference is read from the blob store to sign, then
	// opened again to send, so memory stays bounded) and returns headers
	// to send, over any of the task's headers of those names. An error
	// fails the attempt before any connection is used.
	Sign func(body io.Reader) ([]Header, error)
	// Extra are headers to send over any of the task's of the same names
	// (a destination's headers and credentials), in canonical form.
	Extra []Header
}

// Header is one header field, its name in canonical form.
type Header struct{ Name, Value string }

// Trace is the W3C trace context of one attempt: the task's trace, the
// attempt's own span (the target's parent) and the trace flags.
type Trace struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// Valid reports whether t names a span: neither ID is all zeros.
func (t Trace) Valid() bool { return t.TraceID != [16]byte{} && t.SpanID != [8]byte{} }

// appendTraceparent appends t as a version 00 traceparent value.
func (t Trace) appendTraceparent(b []byte) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, t.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, t.SpanID[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{t.Flags})
}

// SafeURL returns raw, a target URL, as a span's url.full may show it:
// without userinfo, query or fragment, which may hold credentials (a token
// in the query is common), and the host and port it names (the scheme's
// default port when it names none); "" when raw has no scheme. The rule is
// package targeturl's, which the limiter's keys and the stores' target
// hosts follow too.
func SafeURL(raw string) (full, host string, port int) {
	u, ok := targeturl.Cut(raw)
	if !ok {
		return "", "", 0
	}
	host, port = u.HostPort()
	return u.Safe(), host, port
}

// Result is what one attempt came to: a response (Status > 0) or an error.
// Its strings are valid UTF-8 and bounded however much the target sent;
// Location and the text of Err end with "…" where they were cut.
type Result struct {
	Start      time.Time
	Duration   time.Duration
	Status     int           // 0 when no response came
	RetryAfter time.Duration // the response's Retry-After; valid when HasRetryAfter
	// HasRetryAfter reports a valid Retry-After header on the response.
	HasRetryAfter bool
	// NoRetry reports a Retrykit-Retry: never header on the response (the
	// first such field; its value in any case, between white space): the
	// target asks that this request not be sent again, whatever its
	// status says.
	NoRetry bool
	// Location is a redirect's target, which is not followed, cut to
	// MaxQuotedBytes.
	Location string
	// Body is the first bytes of the response body, at most
	// Config.KeepBytes of them, as valid UTF-8 (not marked where cut).
	Body string
	// Err is why no response came; nil when one did. Its text is cut to
	// MaxMessageBytes; it wraps the error it was cut from.
	Err error
}

// Send makes one attempt. It never returns an error of its own: everything,
// the refusal of a target included, is reported in the Result. ctx bounds
// the attempt along with the configured timeout; cancelling it interrupts
// the attempt at once, but for a TCP connect in progress (see
// Config.ConnectTimeout), and the Result's Err is then ctx.Err().
func (d *Dispatcher) Send(ctx context.Context, r Request) Result {
	res := Result{Start: time.Now()}
	res.Err = boundErr(d.send(ctx, r, &res))
	res.Duration = time.Since(res.Start)
	if res.Location != "" {
		res.Location = bound(res.Location, MaxQuotedBytes)
	}
	return res
}

func (d *Dispatcher) send(ctx context.Context, r Request, res *Result) error {
	u, err := url.Parse(r.URL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadTarget, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q (want http or https)", ErrBadTarget, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("%w: no host", ErrBadTarget)
	}
	if strings.Contains(u.Host, ",") { // fasthttp would take it for a list of hosts
		return fmt.Errorf("%w: host %q", ErrBadTarget, u.Host)
	}
	if err := checkRequest(u, &r); err != nil {
		return err
	}
	// An address given as such is refused before any socket is made; a
	// name is judged by what it resolves to, as it is dialled (see
	// Guard.control).
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := d.cfg.Guard.Check(ip); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := res.Start.Add(d.cfg.Timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return d.do(ctx, deadline, u, &r, res)
}

// readBody keeps the first KeepBytes of body in res, as valid UTF-8 of at
// most KeepBytes bytes, and reads on up to MaxResponseBytes in all so that
// the connection can be reused. It reports whether the body was read to its
// end; a longer body is left unread, and its connection must be dropped.
func (d *Dispatcher) readBody(body io.Reader, res *Result) (complete bool) {
	// The buffer is reused: only what is kept is copied out.
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	buf := *bp
	var (
		n   int
		err error
	)
	for n < len(buf) && err == nil {
		var m int
		m, err = body.Read(buf[n:])
		n += m
	}
	complete = err == io.EOF
	if err == nil {
		// One byte past the bound tells a body that ends there from a
		// longer one.
		left := d.cfg.MaxResponseBytes - int64(n)
		m, err := io.CopyN(io.Discard, body, left+1)
		complete = err == io.EOF && m <= left
	}
	res.Body = keep(buf[:n], n == len(buf))
	return complete
}

// keep returns the bytes of a body kept for the attempt log as valid UTF-8
// of at most len(b) bytes; full says b was cut at the buffer's end.
func keep(b []byte, full bool) string {
	max := len(b)
	if full {
		// The cap may have cut a character: drop its first bytes rather
		// than log them as garbage.
		if i := lastStart(b); !utf8.FullRune(b[i:]) {
			b = b[:i]
		}
	}
	// U+FFFD takes three bytes where an invalid byte took one: cut again.
	return cutUTF8(strings.ToValidUTF8(string(b), "\uFFFD"), max)
}

// lastStart returns the index of the last byte of b that can begin a UTF-8
// sequence, or 0.
func lastStart(b []byte) int {
	for i := len(b) - 1; i > 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return 0
}
