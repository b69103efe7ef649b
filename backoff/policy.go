package backoff

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// Kind is how the raw delay grows with the retry number. The zero value is
// Exponential.
type Kind int

// The backoff kinds. Their JSON names are the upper-case words EXPONENTIAL,
// LINEAR, FIXED, CUSTOM and SCHEDULE (CUSTOM cannot be encoded: a function has
// no JSON).
const (
	Exponential Kind = iota // Base · Multiplier^(n−1), growing linearly after MaxDoublings
	Linear                  // Base + Increment·(n−1)
	Fixed                   // Base
	Custom                  // Func(n)
	Schedule                // Delays[n−1], the last one repeating
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

// The defaults that zero fields of a Policy stand for, each on its own.
const (
	DefaultBase         = 100 * time.Millisecond
	DefaultMultiplier   = 2.0
	DefaultMax          = 30 * time.Second
	DefaultJitterFactor = 0.1
)

// MaxScheduleDelays is the longest list of Delays a Schedule may have. A
// schedule longer than this is better said as a growth rule, and the bound
// keeps a decoded policy's size and validation time small.
const MaxScheduleDelays = 100

// None, set as a Policy's Base, Increment or Max, stands for a real zero: no
// delay, no step, no cap, where a zero field would take its default. Any
// negative value of those three fields means the same, as a negative
// net.Dialer.KeepAlive disables keep-alives; a negative Min is invalid.
const None time.Duration = -1

// maxDuration is the longest delay Delay ever returns (about 292 years).
const maxDuration = time.Duration(math.MaxInt64)

// Policy describes how long to wait before each retry. It is a plain value:
// copy it freely and share it between goroutines; nothing in it changes once
// built.
//
// Zero means default, field by field: each zero field takes its own default
// whatever the others hold, so Policy{Multiplier: 3} still starts at
// DefaultBase and is capped at DefaultMax, and the zero Policy is Default().
// For the three fields whose zero would be meaningful, None (or any negative
// value) says zero: Base None gives zero delays (handy in tests), Increment
// None a linear delay that never grows, Max None no cap. Effective returns
// the values a Policy stands for.
type Policy struct {
	Kind       Kind
	Base       time.Duration // the first raw delay, and the floor of decorrelated jitter; 0 means DefaultBase, None zero
	Multiplier float64       // exponential growth factor, ≥ 1; 0 means DefaultMultiplier
	Increment  time.Duration // linear step; 0 means the effective Base, None no step
	Min        time.Duration // lower bound of every delay; 0 means none; never negative
	Max        time.Duration // upper bound of every delay; 0 means DefaultMax, None no cap

	// MaxDoublings, when positive, limits the growth of the Exponential kind
	// as Cloud Tasks' max_doublings does: the delay is multiplied by
	// Multiplier MaxDoublings times, reaching Base·Multiplier^MaxDoublings
	// before retry MaxDoublings+1, and from then on grows linearly by that
	// much per retry, so the delay before retry n is
	// Base·Multiplier^MaxDoublings·(n−MaxDoublings), still capped at Max.
	// It suits a long-lived task that should keep backing off without the
	// long gaps of a doubling that only Max stops. 0 means no limit; it is
	// never negative, and is only for the Exponential kind.
	MaxDoublings int
	// Delays lists the raw delays of the Schedule kind, before retry 1, 2, …;
	// past its end the last delay repeats. Each is 0 or more; a schedule has
	// 1 to MaxScheduleDelays of them, and other kinds none. Like Func it is
	// shared by the Policy's copies: do not change it once in use.
	Delays []time.Duration

	Jitter       Jitter
	JitterFactor float64 // f of ProportionalJitter, in (0, 1]; 0 means DefaultJitterFactor

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

// IsZero reports whether every field of p is zero, so that p is Default().
// Callers use it to substitute a default policy of their own for an unset
// one; Delay does not need it.
func (p *Policy) IsZero() bool {
	return p.Kind == 0 && p.Base == 0 && p.Multiplier == 0 && p.Increment == 0 &&
		p.Min == 0 && p.Max == 0 && p.Jitter == 0 && p.JitterFactor == 0 &&
		p.MaxDoublings == 0 && len(p.Delays) == 0 && p.Func == nil && p.JitterFunc == nil
}

// Effective returns p with its defaults resolved: every zero field replaced by
// the value it stands for, and every negative Base, Increment and Max by None.
// The result behaves exactly as p does, and resolving it again changes
// nothing. Its Max is the cap on every delay, None meaning no cap.
func (p Policy) Effective() Policy {
	base := p.base()
	p.Multiplier = p.multiplier()
	p.Increment = orNone(p.increment(base))
	p.Base = orNone(base)
	if p.Max == 0 {
		p.Max = DefaultMax
	} else if p.Max < 0 {
		p.Max = None
	}
	p.JitterFactor = p.jitterFactor()
	if len(p.Delays) == 0 {
		p.Delays = nil // an empty list and none behave alike, and so compare alike
	}
	return p
}

// The rule "zero means default, negative means None", once per field. Each
// helper is a compare or two, so Delay resolves only what it uses.

// base returns the effective Base, 0 for None.
func (p *Policy) base() time.Duration {
	if b := p.Base; b > 0 {
		return b
	} else if b == 0 {
		return DefaultBase
	}
	return 0
}

// increment returns the effective Increment, 0 for None, given the effective
// base.
func (p *Policy) increment(base time.Duration) time.Duration {
	if inc := p.Increment; inc > 0 {
		return inc
	} else if inc == 0 {
		return base
	}
	return 0
}

// limit returns the effective Max, maxDuration for None.
func (p *Policy) limit() time.Duration {
	if m := p.Max; m > 0 {
		return m
	} else if m == 0 {
		return DefaultMax
	}
	return maxDuration
}

func (p *Policy) multiplier() float64 {
	if p.Multiplier == 0 {
		return DefaultMultiplier
	}
	return p.Multiplier
}

func (p *Policy) jitterFactor() float64 {
	if p.JitterFactor == 0 {
		return DefaultJitterFactor
	}
	return p.JitterFactor
}

// orNone maps a resolved zero back to None, the way Effective spells it.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return None
	}
	return d
}

// Delay returns the delay before retry n (n ≥ 1; smaller n counts as 1).
//
// prev is the delay this execution waited before its previous retry, or 0
// before its first; only DecorrelatedJitter uses it. src supplies randomness;
// nil means the runtime's generator, safe for concurrent use and needing no
// seeding. Delay never allocates (unless a custom function does), never
// overflows and never returns a negative duration, for any n and any policy
// that passes Validate.
func (p *Policy) Delay(n int, prev time.Duration, src Source) time.Duration {
	// The common case, exponential doubling with full jitter, in a few
	// integer operations: Kind, Jitter and MaxDoublings are zero, and
	// Multiplier is 0 or 2, the two float64s whose bits are 0 and 1<<62.
	// delay gives the same results, in more steps.
	if p.Kind|Kind(p.Jitter)|Kind(p.MaxDoublings) == 0 && math.Float64bits(p.Multiplier)&^(1<<62) == 0 {
		// Everything but the draw first, so that only d, and lo when there
		// is a floor or a source to call, live across the call to the
		// generator: one value saved to the stack and read back instead
		// of two is 3–4 % of ten delays (benchmarks' BenchmarkDelays).
		hi := p.limit()
		d := doubling(p.base(), n, hi)
		if p.Min == 0 && src == nil {
			return scaleBits(d, rand.Uint64())
		}
		lo := min(p.Min, hi)
		var u uint64 // draw(src), written out: it is too big to inline
		if src == nil {
			u = rand.Uint64()
		} else {
			u = src.Uint64()
		}
		return max(scaleBits(d, u), lo) // scaleBits is in [0, d), d ≤ hi
	}
	return p.delay(n, prev, src)
}

// delay is Delay for every policy.
func (p *Policy) delay(n int, prev time.Duration, src Source) time.Duration {
	hi := p.limit()
	var d time.Duration
	if p.Kind|Kind(p.MaxDoublings) == 0 && math.Float64bits(p.Multiplier)&^(1<<62) == 0 {
		d = doubling(p.base(), n, hi) // without the call to raw
	} else {
		d = p.raw(n, hi)
	}
	var out time.Duration
	switch p.Jitter {
	case FullJitter:
		out = scaleBits(d, draw(src))
	case NoJitter:
		out = d
	case EqualJitter:
		half := d / 2
		out = half + scaleBits(d-half, draw(src))
	case ProportionalJitter:
		out = fromFloat(float64(d) * (1 + (2*uniform(src)-1)*p.jitterFactor()))
	case DecorrelatedJitter:
		lo := p.base()
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
		out = lo + scaleBits(top-lo, draw(src))
	case CustomJitter:
		if p.JitterFunc != nil {
			out = p.JitterFunc(d, src)
		}
	default:
		out = scaleBits(d, draw(src))
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

// Raw returns the raw delay before retry n (n ≥ 1; smaller n counts as 1),
// capped at the effective Max and before jitter: the d that the jitter
// formulas start from.
func (p *Policy) Raw(n int) time.Duration {
	return p.raw(n, p.limit())
}

func (p *Policy) raw(n int, hi time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	var raw time.Duration
	switch p.Kind {
	case Fixed:
		raw = p.base()
	case Linear:
		base := p.base()
		raw = fromFloat(float64(base) + float64(p.increment(base))*float64(n-1))
	case Custom:
		if p.Func != nil {
			raw = max(p.Func(n), 0)
		}
	case Schedule:
		if len(p.Delays) > 0 {
			raw = max(p.Delays[min(n, len(p.Delays))-1], 0)
		}
	default: // Exponential
		// Past MaxDoublings the growth is linear: the delay reached at
		// retry k = MaxDoublings+1, times n−MaxDoublings.
		k := n
		if d := p.MaxDoublings; d > 0 && n-1 > d {
			k = d + 1
		}
		var peak time.Duration
		if m := p.multiplier(); m == 2 {
			peak = doubling(p.base(), k, hi)
		} else {
			peak = min(fromFloat(float64(p.base())*math.Pow(m, float64(k-1))), hi)
		}
		if k == n {
			return peak
		}
		return times(peak, n-k+1, hi)
	}
	return min(raw, hi)
}

// times returns min(d·k, hi) for 0 ≤ d ≤ hi and k ≥ 1, exactly and in
// integers, for any k: d·k ≤ hi exactly when k ≤ ⌊hi/d⌋, and then the
// product cannot overflow.
func times(d time.Duration, k int, hi time.Duration) time.Duration {
	if d == 0 {
		return 0
	}
	if d >= hi || int64(k) > int64(hi/d) {
		return hi
	}
	return d * time.Duration(k)
}

// doubling returns min(base·2^(n−1), hi) for 0 ≤ base and 0 < hi (n < 1
// counts as 1), exactly and in integers, for any n: base·2^k ≤ hi exactly
// when base ≤ hi>>k, and then the shift cannot overflow. It is what
// math.Ldexp computes, without the float round trip or its rounding of bases
// above 2^53 ns.
func doubling(base time.Duration, n int, hi time.Duration) time.Duration {
	if k := uint(n - 1); k < 63 && base <= hi>>k {
		return base << k
	}
	if n < 1 || base == 0 { // n < 1 made k huge
		return min(base, hi)
	}
	return hi
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

// scaleBits returns ⌊d·u/2^64⌋ for d ≥ 0: d scaled by 64 random bits, in
// [0, d), exactly and without a float. Full, equal and decorrelated jitter
// draw with it; u/2^64 is the uniform variable of their formulas.
func scaleBits(d time.Duration, u uint64) time.Duration {
	hi, _ := bits.Mul64(uint64(d), u)
	return time.Duration(hi)
}
