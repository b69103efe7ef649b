// Package backoff computes retry delays: backoff kinds (exponential, linear,
// fixed, custom, schedule), jitter kinds (full, equal, decorrelated, proportional, none,
// custom) and min/max bounds.
//
// It is delay math only. It never sleeps, keeps no state between calls and
// imports nothing outside the standard library, so every entry point of
// Retrykit (the executor, the transports, the durable service, the Kafka retry
// topics) shares one definition of "the delay before retry n".
//
// Retry n (n ≥ 1) is attempt n+1: the first call is attempt 1, and the delay
// before it is never asked for. For retry n the raw delay is
//
//	fixed:        Base
//	linear:       Base + Increment·(n−1)
//	exponential:  Base · Multiplier^(n−1), or with MaxDoublings = k > 0 and
//	              n−1 > k, Base · Multiplier^k · (n−k): linear past k steps
//	custom:       Func(n)
//	schedule:     Delays[n−1], the last one repeating past the end
//
// computed in floating point so it cannot overflow, then capped at Max. Jitter
// is applied to the capped delay d:
//
//	none:          d
//	full:          uniform in [0, d]
//	equal:         d/2 + uniform in [0, d/2]
//	proportional:  d · (1 + uniform in [−f, +f])
//	decorrelated:  uniform in [Base, min(Max, prev·3)], prev starting at Base
//	custom:        JitterFunc(d, source)
//
// and the result is clamped to [Min, Max].
//
// # Zero means default, field by field
//
// Each zero field of a Policy takes its own default, whatever the other fields
// hold:
//
//	Base          0 → DefaultBase (100ms)     None → no delay
//	Multiplier    0 → DefaultMultiplier (2)
//	Increment     0 → the effective Base      None → no step
//	Min           0 → no floor
//	Max           0 → DefaultMax (30s)        None → no cap
//	JitterFactor  0 → DefaultJitterFactor (0.1)
//	Kind, Jitter  0 → Exponential, FullJitter
//
// None is -1ns; any negative Base, Increment or Max means the same. So
// Policy{Jitter: NoJitter} waits 100ms, 200ms, 400ms, … up to 30s, and
// Policy{Kind: Fixed, Base: None} retries at once. Policy.Effective returns the
// values a policy stands for, and Validate judges those.
//
// # JSON
//
// A Policy encodes with the service's field names: backoff, initialDelayMs,
// multiplier, incrementMs, minDelayMs, maxDelayMs, jitterType, jitterFactor,
// and maxDoublings (written when not 0) and delaysMs (for SCHEDULE). Durations are milliseconds, fractional down to the nanosecond. An omitted or
// null field takes its default; an explicit 0 means zero: initialDelayMs 0 is
// Base None, incrementMs 0 Increment None, maxDelayMs 0 Max None, minDelayMs 0
// no floor. A multiplier or jitterFactor of 0 is an error (omit the field for
// the default). Encoding writes every field's effective value, None as 0, so
// decoding an encoding gives a policy that behaves the same and encodes to the
// same bytes.
//
// # Sharing
//
// A Policy is an immutable value, safe to share between goroutines. The one
// piece of state an execution carries, the previous delay that decorrelated
// jitter grows from, is passed in and out of Delay by the caller, or kept by a
// Sequence that belongs to one execution. A Source shared with a policy must be
// safe for concurrent use too: the nil Source (the runtime's generator) is;
// a seeded math/rand/v2 generator is not, until wrapped with Locked.
package backoff
