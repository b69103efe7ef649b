package kafkaretry

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// HTTPError is a handler error for a failed HTTP call: the Policy classifies
// it by StatusCode (Policy.RetryableStatusCodes), and a retry or DLQ record
// carries StatusCode in x-api-status-code and Body, cut to MaxErrorBytes, in
// x-api-response. Any error with the methods HTTPStatusCode() int and
// ResponseBody() []byte is treated the same way.
type HTTPError struct {
	StatusCode int
	Body       []byte
	Err        error // optional underlying error, reached by Unwrap
}

// Error returns the status and, when set, the underlying error.
func (e *HTTPError) Error() string {
	s := "http status " + strconv.Itoa(e.StatusCode)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *HTTPError) Unwrap() error { return e.Err }

// HTTPStatusCode returns StatusCode.
func (e *HTTPError) HTTPStatusCode() int { return e.StatusCode }

// ResponseBody returns Body.
func (e *HTTPError) ResponseBody() []byte { return e.Body }

// Coder is an error with a class of its own, portable across languages and
// versions: "PAYMENT_DECLINED", "com.acme.LedgerClosed". x-last-error-type
// (and Spring's kafka_dlt-exception-fqcn) carries Code() when an error in
// the chain has one, so that consumers in other languages, dashboards and
// Replay's ErrorType filter need not know Go's type names.
type Coder interface {
	Code() string
}

// errorType is the class of err: the Code() of the first error in its chain
// that has a non-empty one, else the Go type of the innermost error of its
// chain of single Unwraps, the type that says what went wrong, not the fmt
// or retry wrappers around it.
func errorType(err error) string {
	var c Coder
	if errors.As(err, &c) {
		if code := c.Code(); code != "" {
			return code
		}
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return fmt.Sprintf("%T", err)
		}
		err = next
	}
}

// responseBody returns the body carried by err, if any.
func responseBody(err error) ([]byte, bool) {
	var b interface{ ResponseBody() []byte }
	if errors.As(err, &b) {
		return b.ResponseBody(), true
	}
	return nil, false
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
