package retry

import (
	"errors"
	"time"
)

// facts are what the decision step reads from an error, each the first
// found in the error's tree, depth first, as errors.As would find it.
type facts struct {
	permanent bool     // marked with Permanent
	retryable Decision // from a Retryable() bool method; Unknown without one
	status    int      // from an HTTPStatusCode() int method, when hasStatus
	hint      time.Duration
	hasStatus bool
	hasHint   bool // a RetryAfter() time.Duration method was found; a negative hint is none
}

// The methods by which an error describes itself. Aliases, not new types:
// an As method is asked for the interface as written in the docs.
type (
	retryabler  = interface{ Retryable() bool }
	statusCoder = interface{ HTTPStatusCode() int }
	hinter      = interface{ RetryAfter() time.Duration }
	aser        = interface{ As(any) bool }
)

// inspect walks err's tree once for every fact. One walk with plain type
// assertions, each with its own cache in the runtime, costs a fraction of
// one errors.As per fact: it is most of what a retry costs.
func inspect(err error) facts {
	var f facts
	f.walk(err)
	return f
}

func (f *facts) walk(err error) {
	for err != nil {
		if _, ok := err.(*permanentError); ok {
			f.permanent = true
		}
		if r, ok := err.(retryabler); ok && f.retryable == Unknown {
			f.retryable = NoRetry
			if r.Retryable() {
				f.retryable = Retry
			}
		}
		if s, ok := err.(statusCoder); ok && !f.hasStatus {
			f.status, f.hasStatus = s.HTTPStatusCode(), true
		}
		if h, ok := err.(hinter); ok && !f.hasHint {
			f.hint, f.hasHint = h.RetryAfter(), true
		}
		switch x := err.(type) {
		case aser:
			// An error with an As method answers for its own tree, as
			// errors.As lets it.
			f.viaAs(err)
			return
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				f.walk(e)
			}
			return
		default:
			return
		}
	}
}

// viaAs asks errors.As for each fact not known yet.
func (f *facts) viaAs(err error) {
	var pe *permanentError
	if errors.As(err, &pe) {
		f.permanent = true
	}
	var r retryabler
	if f.retryable == Unknown && errors.As(err, &r) {
		f.retryable = NoRetry
		if r.Retryable() {
			f.retryable = Retry
		}
	}
	var s statusCoder
	if !f.hasStatus && errors.As(err, &s) {
		f.status, f.hasStatus = s.HTTPStatusCode(), true
	}
	var h hinter
	if !f.hasHint && errors.As(err, &h) {
		f.hint, f.hasHint = h.RetryAfter(), true
	}
}
