package retry

import (
	"errors"
	"strconv"
	"time"
)

// The reasons an execution stops without success. Every error Do returns
// wraps exactly one of them (or ErrLimited or ErrCircuitOpen, with a
// Limiter), so errors.Is(err, retry.ErrBudgetExhausted) tells why it
// stopped.
var (
	ErrAttemptsExhausted = errors.New("attempts exhausted")
	ErrBudgetExhausted   = errors.New("time budget exhausted")
	ErrNotRetryable      = errors.New("error not retryable")
	ErrCancelled         = errors.New("cancelled")
	ErrQuotaExhausted    = errors.New("retry quota exhausted")
)

// Error is what Do returns when it gives up. It wraps the reason (one of the
// Err… sentinels), the caller's context error and its cause when the context
// ended the execution, and the operation's last error, so errors.Is and
// errors.As reach each of them: errors.Is(err, context.Canceled) holds for a
// context cancelled with a cause of its own too.
type Error struct {
	Reason   error // ErrAttemptsExhausted, ErrBudgetExhausted, …
	Attempts int   // calls made, the first included
	Err      error // the operation's last error; nil when no call was made
	Cause    error // the context's cause when Reason is ErrCancelled, else nil

	ctxErr error // the context's error when Reason is ErrCancelled
}

// Error says why the execution stopped, after how many attempts, and the
// last error: "retry: attempts exhausted after 3 attempts: connection reset".
func (e *Error) Error() string {
	s := "retry: " + e.Reason.Error() + " after " + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the reason, the context's error and cause (if any) and the
// last error.
func (e *Error) Unwrap() []error {
	errs := []error{e.Reason}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	if e.Cause != nil && e.Cause != e.ctxErr {
		errs = append(errs, e.Cause)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Permanent marks err as not worth retrying, whatever the classifier says.
// errors.Is and errors.As still reach err. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool { return inspect(err).permanent }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// After attaches a server's hint to err: wait at least d before the next
// attempt (the Retry-After of HTTP, gRPC's pushback). After(d, nil) is nil.
func After(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &afterError{err: err, d: d}
}

type afterError struct {
	err error
	d   time.Duration
}

func (e *afterError) Error() string             { return e.err.Error() }
func (e *afterError) Unwrap() error             { return e.err }
func (e *afterError) RetryAfter() time.Duration { return e.d }

// RetryAfter returns the wait hint carried by err or anything it wraps: any
// error with a method RetryAfter() time.Duration. ok is false without one; a
// negative hint counts as none.
func RetryAfter(err error) (d time.Duration, ok bool) {
	f := inspect(err)
	if f.hasHint && f.hint >= 0 {
		return f.hint, true
	}
	return 0, false
}

// StatusCode returns the HTTP status carried by err or anything it wraps: any
// error with a method HTTPStatusCode() int.
func StatusCode(err error) (code int, ok bool) {
	f := inspect(err)
	return f.status, f.hasStatus
}
