package backoff

import (
	"errors"
	"math"
	"strconv"
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

// field names a policy field by its JSON name, as a bit in a fieldSet.
type field uint8

const (
	fieldBackoff field = iota
	fieldInitialDelay
	fieldMultiplier
	fieldIncrement
	fieldMinDelay
	fieldMaxDelay
	fieldJitterType
	fieldJitterFactor
	fieldMaxDoublings
	fieldDelays
)

var fieldNames = [...]string{
	fieldBackoff: "backoff", fieldInitialDelay: "initialDelayMs", fieldMultiplier: "multiplier",
	fieldIncrement: "incrementMs", fieldMinDelay: "minDelayMs", fieldMaxDelay: "maxDelayMs",
	fieldJitterType: "jitterType", fieldJitterFactor: "jitterFactor",
	fieldMaxDoublings: "maxDoublings", fieldDelays: "delaysMs",
}

func (f field) String() string { return fieldNames[f] }

// fieldSet is a set of fields: those a JSON decode already found wrong, which
// validation then leaves alone.
type fieldSet uint16

func (s fieldSet) has(fs ...field) bool {
	for _, f := range fs {
		if s&(1<<f) != 0 {
			return true
		}
	}
	return false
}

func (s *fieldSet) add(f field) { *s |= 1 << f }

// Validate reports every problem with p, each as a *FieldError naming the
// field's JSON name, joined with errors.Join; nil means p is usable. It judges
// the effective values (see Effective): the zero Policy is valid, and Min must
// not exceed DefaultMax when Max is zero.
func (p *Policy) Validate() error {
	return errors.Join(p.problems(0)...)
}

// Valid reports whether Validate would return nil, without building its
// report: for the policies most programs use, one comparison. retry.Do
// validates its policy on every call, so this is on its success path.
func (p *Policy) Valid() bool {
	// With these fields zero nothing else can be wrong (-0.0 is not zero
	// here, and goes the long way).
	if uint64(p.Kind)|uint64(p.Jitter)|uint64(p.Min)|math.Float64bits(p.Multiplier)|math.Float64bits(p.JitterFactor)|
		uint64(p.MaxDoublings)|uint64(len(p.Delays)) == 0 {
		return true
	}
	return p.valid()
}

// valid is Valid for the other policies: a few comparisons when p has no
// funcs and no schedule, the full check when it has.
func (p *Policy) valid() bool {
	// A NaN fails every comparison here, and goes to the full check.
	if uint(p.Kind) <= uint(Fixed) && uint(p.Jitter) <= uint(ProportionalJitter) &&
		len(p.Delays) == 0 && (p.MaxDoublings == 0 || p.MaxDoublings > 0 && p.Kind == Exponential) &&
		(p.Jitter != DecorrelatedJitter || p.base() > 0) &&
		(p.Multiplier == 0 || p.Multiplier >= 1 && p.Multiplier <= math.MaxFloat64) &&
		(p.JitterFactor == 0 || p.JitterFactor > 0 && p.JitterFactor <= 1) &&
		(p.Min == 0 || p.Min > 0 && p.Min <= p.limit()) {
		return true
	}
	return p.problems(0) == nil
}

// problems lists p's problems, leaving out those of the fields in skip and the
// checks that involve them.
func (p *Policy) problems(skip fieldSet) []error {
	var errs []error
	bad := func(f field, reason string) {
		if !skip.has(f) {
			errs = append(errs, &FieldError{f.String(), reason})
		}
	}
	switch p.Kind {
	case Exponential, Linear, Fixed:
	case Custom:
		if p.Func == nil {
			bad(fieldBackoff, "CUSTOM needs a Func")
		}
	case Schedule:
	default:
		bad(fieldBackoff, "unknown backoff kind")
	}
	// A kind that failed to decode is unknown here, so the checks that
	// depend on it are left out rather than blamed on the other fields.
	kindKnown := !skip.has(fieldBackoff)
	switch {
	case p.Kind == Schedule && len(p.Delays) == 0:
		bad(fieldDelays, "SCHEDULE needs at least one delay")
	case p.Kind == Schedule && len(p.Delays) > MaxScheduleDelays:
		bad(fieldDelays, "must list at most "+strconv.Itoa(MaxScheduleDelays)+" delays")
	case p.Kind == Schedule:
		for i, d := range p.Delays {
			if d < 0 {
				bad(fieldDelays, "["+strconv.Itoa(i)+"] must not be negative")
			}
		}
	case len(p.Delays) > 0 && kindKnown:
		bad(fieldDelays, "is only for backoff SCHEDULE")
	}
	if p.MaxDoublings < 0 {
		bad(fieldMaxDoublings, "must not be negative")
	} else if p.MaxDoublings > 0 && p.Kind != Exponential && kindKnown {
		bad(fieldMaxDoublings, "is only for backoff EXPONENTIAL")
	}
	switch m := p.Multiplier; {
	case math.IsNaN(m) || math.IsInf(m, 0):
		bad(fieldMultiplier, "must be a finite number")
	case m != 0 && m < 1:
		bad(fieldMultiplier, "must be at least 1 (0 means the default, 2)")
	}
	if p.Min < 0 {
		bad(fieldMinDelay, "must not be negative")
	} else if hi := p.limit(); p.Min > hi && !skip.has(fieldMaxDelay) {
		if p.Max == 0 {
			bad(fieldMinDelay, "must not exceed maxDelayMs, which defaults to "+msString(DefaultMax))
		} else {
			bad(fieldMinDelay, "must not exceed maxDelayMs")
		}
	}
	switch p.Jitter {
	case FullJitter, NoJitter, EqualJitter, ProportionalJitter:
	case DecorrelatedJitter:
		if p.base() == 0 && !skip.has(fieldJitterType) {
			bad(fieldInitialDelay, "must be positive with DECORRELATED jitter, which grows from it")
		}
	case CustomJitter:
		if p.JitterFunc == nil {
			bad(fieldJitterType, "CUSTOM needs a JitterFunc")
		}
	default:
		bad(fieldJitterType, "unknown jitter kind")
	}
	if f := p.JitterFactor; math.IsNaN(f) || f < 0 || f > 1 {
		bad(fieldJitterFactor, "must be within [0, 1] (0 means the default, 0.1)")
	}
	return errs
}
