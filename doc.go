// Package retry runs an operation again when it fails, by a Policy: how many
// attempts, how long in all, which errors are worth another try, and how long
// to wait before each (the delay math lives in package backoff).
//
//	err := retry.Do(ctx, retry.Policy{MaxAttempts: 5}, func(ctx context.Context) error {
//		return client.Ping(ctx)
//	})
//
// The semantics, shared by every part of Retrykit:
//
//   - MaxAttempts counts every call, the first included.
//   - Before a retry, if the time spent, plus the next delay, plus the
//     estimated duration of the next call would overrun Budget, Do stops at once
//     instead of sleeping for nothing. It does the same when the caller's
//     context deadline would pass first.
//   - The caller's own cancellation is never retried, and it ends a sleep at
//     once, leaving no timer or goroutine behind.
//   - An error wrapped with Permanent is never retried; others are retried as
//     the Policy's Classifier says.
//   - An error may carry a server's hint (RetryAfter): the wait is at least the
//     hint, capped at the backoff's Max; if it does not fit the budget, Do stops.
//   - The error Do returns is an *Error: it wraps the last error of the
//     operation and the reason it stopped (ErrAttemptsExhausted,
//     ErrBudgetExhausted, ErrNotRetryable, ErrCancelled, ErrQuotaExhausted), all
//     reachable with errors.Is and errors.As.
//
// A Policy is a plain value, safe to share: everything that changes during
// one execution (the attempt count, the previous delay, the elapsed time)
// lives in that execution. On success Do allocates nothing.
//
// This package and backoff import only the standard library.
package retry
