package backoff

import (
	"math"
	"time"
)

// Kind is how the raw delay grows with the retry number. The zero value is
// Exponential.
type Kind int

// The backoff kinds. Their JSON names are the upper-case words EXPONENTIAL,
// LINEAR, FIXED and CUSTOM (CUSTOM cannot be encoded: a function has no JSON).
const (
	Exponential Kind = iota // Base · Multiplier^(n−1)
	Linear                  // Base + Increment·(n−1)
	Fixed                   // Base
	Custom                  // Func(n)
)

// Jitter is how randomness is applied to the capped delay. The zero value is
// FullJitter, the safe choice: clients that fail together do not retry together.
type Jitter int

// The jitter kinds. Their JSON names are FULL, NONE, EQUAL, DECORRELATED,
// PROPORTIONAL and CUSTOM.
const (
	FullJitter         Jitter = iota // uniform in [0, d]
	NoJitter                         // d
	EqualJitter                      // d/2 + uniform in [0, d/2]
	DecorrelatedJitter               // uniform in [Base, min(Max, prev·3)]
	ProportionalJitter               // d · (1 + uniform in [−f, +f])
	CustomJitter                     // JitterFunc(d, source)
)

// Defaults. A zero Policy means DefaultBase, DefaultMultiplier, DefaultMax and
// FullJitter; within a non-zero Policy, a zero Multiplier, Increment or
// JitterFactor takes its default because zero has no useful meaning there.
const (
	DefaultBase         = 100 * time.Millisecond
	DefaultMultiplier   = 2.0
	DefaultMax          = 30 * time.Second
	DefaultJitterFactor = 0.1
)

// maxDuration is the longest delay Delay ever returns (about 292 years).
const maxDuration = time.Duration(math.MaxInt64)

// Policy describes how long to wait before each retry. It is a plain value:
// copy it freely and share it between goroutines; nothing in it changes once
// built.
//
// The zero Policy is Default(). Once any field is set, Base, Min and Max mean
// exactly what they say: a zero Base gives zero delays (handy in tests) and a
// zero Max means no cap.
type Policy struct {
	Kind       Kind
	Base       time.Duration // the first raw delay; also the floor of decorrelated jitter
	Multiplier float64       // exponential growth factor, ≥ 1; 0 means DefaultMultiplier
	Increment  time.Duration // linear step; 0 means Base
	Min        time.Duration // lower bound of every delay
	Max        time.Duration // upper bound of every delay; 0 means no cap

	Jitter       Jitter
	JitterFactor float64 // f of ProportionalJitter, in [0, 1]; 0 means DefaultJitterFactor

	// Func gives the raw delay before retry n when Kind is Custom. It must be
	// safe for concurrent use; a negative result counts as zero.
	Func func(retry int) time.Duration
	// JitterFunc jitters the capped delay d when Jitter is CustomJitter. It
	// must be safe for concurrent use; its result is clamped to [Min, Max].
	JitterFunc func(d time.Duration, src Source) time.Duration
}

// Default returns the policy a zero Policy stands for: exponential from
// DefaultBase, doubling, capped at DefaultMax, with full jitter.
func Default() Policy {
	return Policy{Kind: Exponential, Base: DefaultBase, Multiplier: DefaultMultiplier, Max: DefaultMax}
}

// IsZero reports whether p is the zero Policy, which stands for Default().
func (p *Policy) IsZero() bool {
	return p.Kind == 0 && p.Base == 0 && p.Multiplier == 0 && p.Increment == 0 &&
		p.Min == 0 && p.Max == 0 && p.Jitter == 0 && p.JitterFactor == 0 &&
		p.Func == nil && p.JitterFunc == nil
}

// MaxDelay returns the cap on every delay p computes: Max, or DefaultMax for
// the zero Policy; 0 means no cap.
func (p *Policy) MaxDelay() time.Duration {
	if p.IsZero() {
		return DefaultMax
	}
	return p.Max
}

// Delay returns the delay before retry n (n ≥ 1; smaller n counts as 1).
//
// prev is the delay this execution waited before its previous retry, or 0
// before its first; only DecorrelatedJitter uses it. src supplies randomness;
// nil means a source safe for concurrent use that needs no seeding. Delay never
// allocates (unless a custom function does), never overflows and never returns
// a negative duration, for any n and any policy that passes Validate.
func (p *Policy) Delay(n int, prev time.Duration, src Source) time.Duration {
	if p.IsZero() {
		d := Default()
		return d.delay(n, prev, src)
	}
	return p.delay(n, prev, src)
}

func (p *Policy) delay(n int, prev time.Duration, src Source) time.Duration {
	if n < 1 {
		n = 1
	}
	hi := p.Max
	if hi <= 0 {
		hi = maxDuration
	}
	d := p.Raw(n)
	var out time.Duration
	switch p.Jitter {
	case NoJitter:
		out = d
	case EqualJitter:
		half := d / 2
		out = half + scale(d-half, uniform(src))
	case ProportionalJitter:
		f := p.JitterFactor
		if f == 0 {
			f = DefaultJitterFactor
		}
		out = fromFloat(float64(d) * (1 + (2*uniform(src)-1)*f))
	case DecorrelatedJitter:
		lo := p.Base
		if prev <= 0 {
			prev = lo
		}
		top := hi
		if prev < top/3 {
			top = prev * 3
		}
		if top < lo {
			top = lo
		}
		out = lo + scale(top-lo, uniform(src))
	case CustomJitter:
		if p.JitterFunc != nil {
			out = p.JitterFunc(d, src)
		}
	default: // FullJitter
		out = scale(d, uniform(src))
	}
	if out < p.Min {
		out = p.Min
	}
	if out > hi {
		out = hi
	}
	if out < 0 {
		out = 0
	}
	return out
}

// Raw returns the raw delay before retry n, capped at Max and before jitter.
// It is the d that the jitter formulas start from.
func (p *Policy) Raw(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	var raw time.Duration
	switch p.Kind {
	case Fixed:
		raw = p.Base
	case Linear:
		inc := p.Increment
		if inc == 0 {
			inc = p.Base
		}
		raw = fromFloat(float64(p.Base) + float64(inc)*float64(n-1))
	case Custom:
		if p.Func != nil {
			raw = p.Func(n)
		}
	default: // Exponential
		raw = exponential(p.Base, p.Multiplier, n)
	}
	if raw < 0 {
		raw = 0
	}
	if p.Max > 0 && raw > p.Max {
		raw = p.Max
	}
	return raw
}

func exponential(base time.Duration, m float64, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	if m == 0 {
		m = DefaultMultiplier
	}
	if m == 2 {
		// Ldexp is exact and far cheaper than Pow for the common case.
		if n-1 > 1100 {
			return maxDuration
		}
		return fromFloat(math.Ldexp(float64(base), n-1))
	}
	return fromFloat(float64(base) * math.Pow(m, float64(n-1)))
}

// fromFloat converts nanoseconds to a Duration, saturating instead of
// overflowing; NaN and negatives become 0.
func fromFloat(ns float64) time.Duration {
	if !(ns > 0) {
		return 0
	}
	if ns >= 0x1p63 {
		return maxDuration
	}
	return time.Duration(ns)
}

// scale returns d·u for u in [0, 1), without overflow.
func scale(d time.Duration, u float64) time.Duration {
	return fromFloat(float64(d) * u)
}
