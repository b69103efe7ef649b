// Package retry runs an operation again when it fails, by a Policy: how many
// attempts, how long in all, which errors are worth another try, and how long
// to wait before each (the delay math lives in package backoff).
//
//	err := retry.Do(ctx, retry.Policy{MaxAttempts: 5}, func(ctx context.Context) error {
//		return client.Ping(ctx)
//	})
//
// The semantics, shared by every part of Retrykit. After each failed
// attempt, one decision step (Policy.Decide) says what follows; retryd's
// scheduler and kafkaretry call the same step, and package retrytest holds
// its rules as a table (StepCases) that every executor is tested against:
//
//   - An invalid Policy is an error before any call; so is a context that
//     has already ended. Every zero field takes its default, field by field.
//   - MaxAttempts counts every call, the first included.
//   - The caller's own cancellation or deadline is never retried, and it ends
//     a sleep at once, leaving no timer or goroutine behind. The error says
//     so (ErrCancelled) and wraps the context's error and its cause.
//   - An error wrapped with Permanent is never retried; others are retried as
//     the Policy's Classifier says. A classifier that is a Delayer may choose
//     the wait for the errors it knows (RetryAfterIf).
//   - An error may carry a server's hint (RetryAfter): the wait is at least
//     the hint, never cut by the backoff's Max. With a Budget, a hint that
//     does not fit stops the execution now; without one, hints are capped at
//     MaxRetryAfter (DefaultMaxRetryAfter unless set).
//   - Before a retry, if the time spent, plus the wait, plus the expected
//     duration of the next call would overrun Budget, Do stops at once
//     instead of sleeping for nothing; the same when the caller's deadline
//     would pass first. The Budget is also op's context's deadline, and
//     AttemptTimeout gives each call a deadline of its own.
//   - With a Quota, each retry takes a token; an empty quota stops retries.
//   - With a Limiter, shared by the calls to one dependency, every attempt
//     (the first included) waits for it: the Policy says whether to retry,
//     the Limiter when an attempt may go. Its rate falls on overload signals
//     and climbs back on successes; a wait past the budget or the caller's
//     deadline stops the execution (ErrLimited, ErrCircuitOpen).
//   - The error Do returns is an *Error: it wraps the last error of the
//     operation and the reason it stopped (ErrAttemptsExhausted,
//     ErrBudgetExhausted, ErrNotRetryable, ErrCancelled, ErrQuotaExhausted,
//     ErrLimited, ErrCircuitOpen), all reachable with errors.Is and errors.As.
//   - An Observer hears the end of every attempt: Succeeded, Retrying (with
//     the wait) or GaveUp (with the reason); logging is an Observer too.
//
// A Policy is a plain value, safe to share: everything that changes during
// one execution (the attempt count, the previous delay, the elapsed time)
// lives in that execution. On success Do allocates nothing (with a Budget,
// the deadline it gives op's context is one context.WithTimeout).
//
// This package and backoff import only the standard library.
package retry
