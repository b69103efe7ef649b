package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
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

// errorType names the innermost error of err's chain of single Unwraps: the
// type that says what went wrong, not the fmt or retry wrappers around it.
func errorType(err error) string {
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

// retryable reports whether p retries err, as judged by the core engine
// itself: retry.Do is handed one failure and asked for a second call, with
// no delay, no budget, no quota and no hooks, so only the classification
// (Permanent, Classifier, Retryable(), HTTPStatusCode() against
// RetryableStatusCodes) decides. The retry package does not export its
// decision; this keeps a single definition of it.
func retryable(p *retry.Policy, err error) bool {
	q := retry.Policy{
		MaxAttempts:          2,
		Backoff:              backoff.Policy{Kind: backoff.Fixed, Jitter: backoff.NoJitter},
		Classifier:           p.Classifier,
		RetryableStatusCodes: p.RetryableStatusCodes,
		Clock:                noWait{},
	}
	first := true
	return retry.Do(context.Background(), q, func(context.Context) error {
		if first {
			first = false
			return err
		}
		return nil
	}) == nil
}

// noWait is a retry.Clock whose sleeps end at once, for retryable: a
// Retry-After hint on the error must not make the judgement wait.
type noWait struct{}

func (noWait) Now() time.Time                                   { return time.Time{} }
func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
