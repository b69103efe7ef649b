// Package backoff computes retry delays: backoff kinds (exponential, linear,
// fixed, custom), jitter kinds (full, equal, decorrelated, proportional, none,
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
//	exponential:  Base · Multiplier^(n−1)
//	custom:       Func(n)
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
// A Policy is an immutable value, safe to share between goroutines. The one
// piece of state an execution carries, the previous delay that decorrelated
// jitter grows from, is passed in and out of Delay by the caller, or kept by a
// Sequence that belongs to one execution.
package backoff
