package dispatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// netHTTP sends an attempt through net/http's Transport, as the
// Dispatcher did for https targets before it used fasthttp: the reference
// the tests hold the Dispatcher to. What net/http makes of a response (its
// status, the headers an attempt reads, the body, or an error) is what an
// attempt should make of it; so is what a target sees of a request.
type netHTTP struct {
	tr        *http.Transport
	keepBytes int
	maxBytes  int64
	timeout   time.Duration
}

func newNetHTTP(tlsConfig *tls.Config, keepBytes int, maxBytes int64, timeout time.Duration) *netHTTP {
	return &netHTTP{
		tr: &http.Transport{TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: 256, DisableCompression: true,
			ForceAttemptHTTP2: false},
		keepBytes: cmpOr(keepBytes, DefaultKeepBytes),
		maxBytes:  cmpOr(maxBytes, DefaultMaxResponseBytes),
		timeout:   cmpOr(timeout, DefaultTimeout),
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (n *netHTTP) Close() { n.tr.CloseIdleConnections() }

// Send is Dispatcher.Send through net/http, for a request checkRequest
// accepts.
func (n *netHTTP) Send(ctx context.Context, r Request) Result {
	res := Result{Start: time.Now()}
	u, err := url.Parse(r.URL)
	if err == nil {
		err = checkRequest(u, &r)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, n.timeout)
		err = n.send(ctx, u, &r, &res)
		cancel()
	}
	res.Err = boundErr(err)
	res.Duration = time.Since(res.Start)
	if res.Location != "" {
		res.Location = bound(res.Location, MaxQuotedBytes)
	}
	return res
}

func (n *netHTTP) send(ctx context.Context, u *url.URL, r *Request, res *Result) error {
	req := (&http.Request{Method: r.Method, URL: u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
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
		if k = textproto.CanonicalMIMEHeaderKey(k); !managed(k) && !attemptHeader(r, k) {
			req.Header[k] = []string{v}
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{defaultUserAgent}
	}
	if r.IdempotencyKey != "" {
		req.Header["Idempotency-Key"] = []string{r.IdempotencyKey}
	}
	if r.TaskID != "" {
		req.Header[HeaderTaskID] = []string{r.TaskID}
		req.Header[HeaderAttempt] = []string{strconv.Itoa(r.Attempt)}
		req.Header[HeaderFirstAttemptAt] = []string{strconv.FormatInt(r.FirstAttemptAt.UnixMilli(), 10)}
	}
	resp, err := n.tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 100 {
		return fmt.Errorf("%w: status %d", errMalformed, resp.StatusCode)
	}
	res.Status = resp.StatusCode
	res.RetryAfter, res.HasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), res.Start)
	res.NoRetry = parseNoRetry([]byte(resp.Header.Get(HeaderRetry)))
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		res.Location = resp.Header.Get("Location")
	}
	buf := make([]byte, n.keepBytes)
	got, _ := io.ReadFull(resp.Body, buf)
	if got == len(buf) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, n.maxBytes-int64(got)))
	}
	kept := buf[:got]
	if got == len(buf) {
		if i := lastStart(kept); !utf8.FullRune(kept[i:]) {
			kept = kept[:i]
		}
	}
	res.Body = cutUTF8(strings.ToValidUTF8(string(kept), "\uFFFD"), len(buf))
	return nil
}
