package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/retrykit/retry/retryhttp"
)

// ErrBadRequest is returned (wrapped) for a request that cannot be written
// as HTTP: a method that is not a token, a header name or value that is
// not valid, a Host with spaces. Such an attempt is not retried.
var ErrBadRequest = errors.New("bad request")

// defaultUserAgent is sent when a task sets no User-Agent.
const defaultUserAgent = "retryd"

// checkRequest vets what r would put on the wire, so that neither client
// can be made to write a header or a request line it did not mean to.
func checkRequest(u *url.URL, r *Request) error {
	if !httpguts.ValidHeaderFieldName(r.Method) {
		return fmt.Errorf("%w: method %q", ErrBadRequest, r.Method)
	}
	if r.BodyRef != "" && len(r.Body) > 0 {
		return fmt.Errorf("%w: both a body and a body reference", ErrBadRequest)
	}
	host := u.Host
	if h, ok := hostOverride(r.Headers); ok {
		host = h
	}
	if !httpguts.ValidHostHeader(host) || strings.ContainsAny(host, " \t") {
		return fmt.Errorf("%w: host %q", ErrBadRequest, host)
	}
	for k, v := range r.Headers {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("%w: header name %q", ErrBadRequest, k)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return fmt.Errorf("%w: the value of header %s", ErrBadRequest, k)
		}
	}
	if len(r.Headers) > 1 {
		// Two names for one header would be sent twice by one client and
		// once by the other, and which Host is meant would be a toss-up.
		seen := make(map[string]bool, len(r.Headers))
		for k := range r.Headers {
			if k = textproto.CanonicalMIMEHeaderKey(k); seen[k] {
				return fmt.Errorf("%w: header %s given twice (names are case-insensitive)", ErrBadRequest, k)
			}
			seen[k] = true
		}
	}
	if !httpguts.ValidHeaderFieldValue(r.IdempotencyKey) {
		return fmt.Errorf("%w: idempotency key %q", ErrBadRequest, r.IdempotencyKey)
	}
	if !httpguts.ValidHeaderFieldValue(r.TaskID) {
		return fmt.Errorf("%w: task ID %q", ErrBadRequest, r.TaskID)
	}
	return nil
}

// The headers that tell a target which task and attempt it is answering
// (Request.TaskID), and the one by which it can ask for no more retries.
const (
	HeaderTaskID         = "Retrykit-Task-Id"
	HeaderAttempt        = "Retrykit-Attempt"
	HeaderFirstAttemptAt = "Retrykit-First-Attempt-At"
	HeaderRetry          = "Retrykit-Retry"
)

// attemptHeader reports whether the canonical header k is one that r's
// TaskID has the client set, over a task's or a destination's header of
// that name: the target must be able to trust what they say.
func attemptHeader(r *Request, k string) bool {
	if r.TaskID == "" {
		return false
	}
	switch k {
	case HeaderTaskID, HeaderAttempt, HeaderFirstAttemptAt:
		return true
	}
	return false
}

// maxRetryValue is the longest Retrykit-Retry value looked at: "never"
// with some white space around it. A longer one says something else, and
// is not trimmed at all, so that reading it costs the same whatever its
// length.
const maxRetryValue = 32

// parseNoRetry reports whether v, a Retrykit-Retry value, is "never", in
// any case, with optional white space around it.
func parseNoRetry(v []byte) bool {
	if len(v) > maxRetryValue {
		return false
	}
	return bytes.EqualFold(bytes.Trim(v, " \t"), []byte("never"))
}

// hostOverride returns the value of a Host header among h, which names the
// target's virtual host instead of the URL's; an empty one names none, as
// with net/http.
func hostOverride(h map[string]string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, "Host") && v != "" {
			return v, true
		}
	}
	return "", false
}

// managed reports whether the canonical header k is the client's to set:
// framing and connection headers, which a task setting them would
// contradict, and Host, which hostOverride reads.
func managed(k string) bool {
	switch k {
	case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Te", "Connection", "Keep-Alive",
		"Proxy-Connection", "Upgrade":
		return true
	}
	return false
}

// parseRetryAfter reads a Retry-After value, an empty one being absent.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	return retryhttp.ParseRetryAfter(v, now)
}
