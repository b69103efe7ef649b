package retry

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Decision is a classifier's answer about one error. The zero value is
// Unknown: "not mine to say", so the next classifier is asked.
type Decision int

// The decisions.
const (
	Unknown Decision = iota
	Retry
	NoRetry
)

// String returns "unknown", "retry" or "no-retry".
func (d Decision) String() string {
	switch d {
	case Retry:
		return "retry"
	case NoRetry:
		return "no-retry"
	}
	return "unknown"
}

// Classifier decides whether an error is worth another attempt. It must be
// safe for concurrent use. It never sees the caller's own cancellation or a
// Permanent error: Do settles those first.
type Classifier interface {
	Classify(err error) Decision
}

// ClassifierFunc adapts a function to a Classifier.
type ClassifierFunc func(err error) Decision

// Classify returns f(err).
func (f ClassifierFunc) Classify(err error) Decision { return f(err) }

// Classifiers asks each classifier in turn; the first answer other than
// Unknown wins.
type Classifiers []Classifier

// Classify returns the first decision other than Unknown, or Unknown.
func (cs Classifiers) Classify(err error) Decision {
	for _, c := range cs {
		if d := c.Classify(err); d != Unknown {
			return d
		}
	}
	return Unknown
}

// RetryDelay returns the wait chosen by the first classifier that is a
// Delayer and chooses one for err.
func (cs Classifiers) RetryDelay(err error, n int) (time.Duration, bool) {
	for _, c := range cs {
		if dl, ok := c.(Delayer); ok {
			if d, ok := dl.RetryDelay(err, n); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// RetryAfterIf retries the errors pred accepts, waiting d before each such
// retry instead of the backoff's delay (a server's hint, when longer, still
// wins); it leaves the others Unknown. Put it in Classifiers before the
// others to give, say, throttling errors a longer wait.
func RetryAfterIf(pred func(error) bool, d time.Duration) Classifier {
	return delayIf{pred, d}
}

type delayIf struct {
	pred func(error) bool
	d    time.Duration
}

func (c delayIf) Classify(err error) Decision {
	if c.pred(err) {
		return Retry
	}
	return Unknown
}

func (c delayIf) RetryDelay(err error, _ int) (time.Duration, bool) {
	if c.pred(err) {
		return c.d, true
	}
	return 0, false
}

// RetryIf retries the errors pred accepts and leaves the others Unknown.
func RetryIf(pred func(error) bool) Classifier {
	return ClassifierFunc(func(err error) Decision {
		if pred(err) {
			return Retry
		}
		return Unknown
	})
}

// NoRetryIf refuses the errors pred accepts and leaves the others Unknown.
func NoRetryIf(pred func(error) bool) Classifier {
	return ClassifierFunc(func(err error) Decision {
		if pred(err) {
			return NoRetry
		}
		return Unknown
	})
}

// RetryOn retries errors that are (errors.Is) one of targets.
func RetryOn(targets ...error) Classifier {
	targets = append([]error(nil), targets...)
	return RetryIf(func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	})
}

// RetryOnType retries errors that have an E in their tree (errors.As).
func RetryOnType[E error]() Classifier {
	return RetryIf(func(err error) bool {
		var e E
		return errors.As(err, &e)
	})
}

// Transient retries the errors IsTransient accepts.
func Transient() Classifier { return RetryIf(IsTransient) }

// IsTransient reports whether err looks like a passing network failure: a
// timeout, a refused, reset or aborted connection, a broken pipe, an
// unreachable host or network, a connection cut mid-message, or a temporary
// DNS failure. A context's cancellation is not transient; a deadline is only
// transient when it is not the caller's, which Do checks before any
// classifier runs.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, target := range [...]error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Classify reports whether p retries err, Retry or NoRetry, never Unknown.
// In order: an error marked Permanent is not retried; then the Policy's
// Classifier decides, if it knows; then the error itself, through a
// Retryable() bool or an HTTPStatusCode() int method (checked against
// RetryableStatusCodes); last the fallback: retry every error when no
// Classifier is set, none when one is. Classify does not see the caller's
// context, attempts or budget: Do checks those around it. Code that runs
// attempts outside Do (a durable service, a Kafka retry topic) calls it to
// classify errors exactly as Do would.
func (p *Policy) Classify(err error) Decision {
	f := inspect(err)
	return p.classify(err, &f)
}

// classify is Classify with err's facts already read.
func (p *Policy) classify(err error, f *facts) Decision {
	if f.permanent {
		return NoRetry
	}
	if p.Classifier != nil {
		if d := p.Classifier.Classify(err); d != Unknown {
			return d
		}
	}
	if f.retryable != Unknown {
		return f.retryable
	}
	if f.hasStatus {
		if p.RetryableStatus(f.status) {
			return Retry
		}
		return NoRetry
	}
	if p.Classifier != nil {
		return NoRetry
	}
	return Retry
}
