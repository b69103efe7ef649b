package backoff

import (
	"errors"
	"math"
	"time"
)

// FieldError is one problem with one field of a policy. Field is the field's
// JSON name (initialDelayMs, jitterType, …), the name an API user sees.
type FieldError struct {
	Field  string
	Reason string
}

// Error returns "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// FieldErrors returns every *FieldError in err's tree, in order. It is how a
// caller lists all the problems Validate or a JSON decode found.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// maxMillis is the largest whole number of milliseconds a Duration holds.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// Validate reports every problem with p, each as a *FieldError, joined with
// errors.Join; nil means p is usable. The zero Policy is valid.
func (p *Policy) Validate() error {
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &FieldError{field, reason}) }

	switch p.Kind {
	case Exponential, Linear, Fixed:
	case Custom:
		if p.Func == nil {
			bad("backoff", "CUSTOM needs a Func")
		}
	default:
		bad("backoff", "unknown backoff kind")
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"initialDelayMs", p.Base}, {"incrementMs", p.Increment}, {"minDelayMs", p.Min}, {"maxDelayMs", p.Max}} {
		if f.d < 0 {
			bad(f.name, "must not be negative")
		}
	}
	switch m := p.Multiplier; {
	case math.IsNaN(m) || math.IsInf(m, 0):
		bad("multiplier", "must be a finite number")
	case m != 0 && m < 1:
		bad("multiplier", "must be at least 1 (0 means the default, 2)")
	}
	if p.Max > 0 && p.Min > p.Max {
		bad("minDelayMs", "must not exceed maxDelayMs")
	}
	switch p.Jitter {
	case FullJitter, NoJitter, EqualJitter, ProportionalJitter:
	case DecorrelatedJitter:
		if p.Base <= 0 {
			bad("initialDelayMs", "must be positive with DECORRELATED jitter, which grows from it")
		}
	case CustomJitter:
		if p.JitterFunc == nil {
			bad("jitterType", "CUSTOM needs a JitterFunc")
		}
	default:
		bad("jitterType", "unknown jitter kind")
	}
	if f := p.JitterFactor; math.IsNaN(f) || f < 0 || f > 1 {
		bad("jitterFactor", "must be within [0, 1]")
	}
	return errors.Join(errs...)
}
