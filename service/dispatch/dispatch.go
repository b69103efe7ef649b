// Package dispatch makes retryd's outbound calls: one HTTP request per
// attempt, with the task's stored method, headers and body plus its
// Idempotency-Key, bounded in time and in what it reads, refusing addresses
// a tenant must not reach, and never following a redirect. It reports what
// happened as a Result; Result.Outcome applies a retry policy to it.
//
// http:// targets are called by a lean HTTP/1.1 client of this package's
// own (see h1.go for why; on Unix but AIX), https:// targets through
// net/http, which brings TLS and HTTP/2. Both send the same request (a test holds them to it):
// the task's headers but the framing and connection ones, which the client
// sets, a User-Agent of "retryd" unless the task sets one, and a
// Content-Length when there is a body or the method is POST, PUT or PATCH.
package dispatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
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
	Guard            Guard         // which resolved addresses may be called
	ConnectTimeout   time.Duration // to connect, TLS handshake included
	Timeout          time.Duration // the whole attempt: connect, send, headers, body
	MaxResponseBytes int64         // read at most this much of a response, then drop the connection
	KeepBytes        int           // the first bytes of the response kept for the attempt log
	MaxIdlePerHost   int           // idle keep-alive connections kept per target host
	TLS              *tls.Config   // for https targets; nil means the system's roots
}

// Dispatcher sends attempts. It is safe for concurrent use; Close it to
// release idle connections.
type Dispatcher struct {
	cfg Config
	// dialer connects both clients; its Control runs the Guard on every
	// address it is about to connect to.
	dialer *net.Dialer
	// h1 sends to http:// targets (see h1 for why not net/http).
	h1 *h1
	// tr sends to https:// targets. It is used directly, without an
	// http.Client: a Transport never follows redirects, and an attempt
	// needs none of a Client's cookie, header-copying or timeout machinery
	// (the context bounds it).
	tr *http.Transport
	// bufs holds KeepBytes-long buffers for reading responses, so that an
	// attempt allocates only the bytes it keeps.
	bufs sync.Pool
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
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second, Control: guard.control}
	tr := &http.Transport{
		Proxy:               nil, // a proxy would be dialled instead of the target, hiding it from the guard
		DialContext:         dialer.DialContext,
		TLSClientConfig:     cfg.TLS,
		TLSHandshakeTimeout: cfg.ConnectTimeout,
		MaxIdleConns:        4 * cfg.MaxIdlePerHost,
		MaxIdleConnsPerHost: cfg.MaxIdlePerHost,
		IdleConnTimeout:     idleTimeout,
		ForceAttemptHTTP2:   true,
		// An attempt keeps only the first bytes of a response, as they
		// came, and discards the rest: asking for gzip would only add a
		// header to every request and decompression to every response.
		DisableCompression: true,
	}
	d := &Dispatcher{cfg: cfg, dialer: dialer, tr: tr, h1: &h1{
		dial: dialer.DialContext,
		pool: pool{perHost: cfg.MaxIdlePerHost, total: 4 * cfg.MaxIdlePerHost, idleTimeout: idleTimeout},
	}}
	d.bufs.New = func() any {
		b := make([]byte, cfg.KeepBytes)
		return &b
	}
	return d
}

// idleTimeout is how long an idle keep-alive connection is kept.
const idleTimeout = 90 * time.Second

// Timeout returns the bound on one attempt; a lease must outlast it.
func (d *Dispatcher) Timeout() time.Duration { return d.cfg.Timeout }

// Close drops idle connections. Sends in progress are not interrupted; the
// connections of those to http:// targets are closed when they end.
func (d *Dispatcher) Close() {
	d.h1.pool.close()
	d.tr.CloseIdleConnections()
}

// Request is one attempt to send.
type Request struct {
	Method         string
	URL            string
	Headers        map[string]string
	Body           []byte
	IdempotencyKey string // sent as Idempotency-Key, over any stored header of that name
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
// the attempt along with the configured timeout.
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
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	// An internationalized host name is left to net/http, which knows to
	// send it in Punycode.
	if leanHTTP && u.Scheme == "http" && ascii(u.Host) {
		return d.h1.send(ctx, u, &r, res, d.readBody)
	}
	return d.sendStd(ctx, u, &r, res)
}

func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sendStd sends through net/http, which brings TLS and HTTP/2.
func (d *Dispatcher) sendStd(ctx context.Context, u *url.URL, r *Request, res *Result) error {
	req := (&http.Request{Method: r.Method, URL: u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		// Sized once: growing the map as headers are set costs an
		// allocation per attempt.
		Header: make(http.Header, len(r.Headers)+1)}).WithContext(ctx)
	if len(r.Body) > 0 {
		req.ContentLength = int64(len(r.Body))
		req.Body = io.NopCloser(bytes.NewReader(r.Body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(r.Body)), nil }
	}
	if h, ok := hostOverride(r.Headers); ok {
		req.Host = h
	}
	for k, v := range r.Headers {
		if k = textproto.CanonicalMIMEHeaderKey(k); !managed(k) {
			req.Header[k] = []string{v}
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{defaultUserAgent}
	}
	if r.IdempotencyKey != "" {
		req.Header["Idempotency-Key"] = []string{r.IdempotencyKey}
	}
	resp, err := d.tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 100 { // as h1 reads it: no status at all
		return fmt.Errorf("%w: status %d", errMalformed, resp.StatusCode)
	}
	res.Status = resp.StatusCode
	res.RetryAfter, res.HasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), res.Start)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		res.Location = resp.Header.Get("Location")
	}
	res.Body = d.readBody(resp.Body)
	return nil
}

// readBody keeps the first KeepBytes of body, as valid UTF-8 of at most
// KeepBytes bytes, and reads on up to MaxResponseBytes so that the
// connection can be reused; a longer body is left unread and its
// connection dropped by Close.
func (d *Dispatcher) readBody(body io.Reader) string {
	// The buffer is reused: only what is kept is copied out.
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	buf := *bp
	n, _ := io.ReadFull(body, buf)
	if n == len(buf) {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, d.cfg.MaxResponseBytes-int64(n)))
	}
	kept := buf[:n]
	if n == len(buf) {
		// The cap may have cut a character: drop its first bytes rather
		// than log them as garbage.
		if i := lastStart(kept); !utf8.FullRune(kept[i:]) {
			kept = kept[:i]
		}
	}
	// U+FFFD takes three bytes where an invalid byte took one: cut again.
	return cutUTF8(strings.ToValidUTF8(string(kept), "\uFFFD"), len(buf))
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
