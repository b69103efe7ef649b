package retryhttp

import (
	"errors"
	"io"
	"time"

	"github.com/retrykit/retry"
)

// StatusError is what an attempt that got a retryable status (one of the
// Policy's RetryableStatusCodes) reports to the retry engine, so
// Policy.Observer, Policy.Classifier and Policy.Logger see it; find it with
// errors.As. It never reaches the caller when retries stop on such a status:
// RoundTrip then returns the response itself with a nil error. The caller
// sees it only inside the error of a request cancelled during a wait.
type StatusError struct {
	Method     string // the request's method
	URL        string // the request's URL, its password redacted
	StatusCode int    // the response's status code
	Status     string // the response's status line, e.g. "503 Service Unavailable"

	retryAfter time.Duration // the server's Retry-After; negative when absent or malformed
}

// Error returns the status and the server's Retry-After, if any.
func (e *StatusError) Error() string {
	s := "http status " + e.Status
	if e.retryAfter >= 0 {
		s += "; Retry-After " + e.retryAfter.String()
	}
	return s
}

// HTTPStatusCode returns StatusCode, for the Policy's classification.
func (e *StatusError) HTTPStatusCode() int { return e.StatusCode }

// RetryAfter returns the wait the server asked for with its Retry-After
// header, or a negative duration when it sent none or a malformed one.
func (e *StatusError) RetryAfter() time.Duration { return e.retryAfter }

// TransportError is what an attempt that got no response reports to the
// retry engine: the Base transport's error (reached through Unwrap), with
// the request's method and URL. Connection failures, resets, timeouts, a
// connection closed before the response, and temporary DNS failures are
// retried; other errors (a bad URL, a TLS certificate error) are not, unless
// the Policy's Classifier says otherwise. When retries stop, RoundTrip
// returns a *retry.Error that wraps it.
type TransportError struct {
	Method string // the request's method
	URL    string // the request's URL, its password redacted
	Err    error  // what the Base transport returned
}

// Error returns Err's message unchanged: http.Client already prefixes the
// method and URL.
func (e *TransportError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *TransportError) Unwrap() error { return e.Err }

// Retryable reports whether Err is a passing failure worth another attempt.
func (e *TransportError) Retryable() bool { return transient(e.Err) }

// transient extends retry.IsTransient with io.EOF: from an HTTP transport,
// EOF means the server closed the connection before it answered.
func transient(err error) bool {
	return retry.IsTransient(err) || errors.Is(err, io.EOF)
}
