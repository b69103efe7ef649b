package retrytest

import (
	"strconv"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// StepCase is one rule of the decision step (retry.Policy.Decide) told as
// a run of attempts. Every executor — retry.Do, retryd's scheduler,
// kafkaretry, or one of your own — must make exactly the waits in Delays and
// stop for Reason when its attempts end as Results say.
type StepCase struct {
	Name   string
	Policy retry.Policy // no jitter, so that delays are exact
	// Results are the attempts' outcomes in order; the last one repeats for
	// as long as the executor goes on.
	Results []Result
	Delays  []time.Duration // the waits between attempts, in order
	Reason  error           // why it stops (retry.ErrAttemptsExhausted, …); nil: the last attempt succeeds
}

// Result is how one attempt of a StepCase ends: the HTTP status a target
// answered, with its Retry-After, after Took.
type Result struct {
	Status     int           // 2xx is a success
	RetryAfter time.Duration // the target's hint; 0 for none
	Took       time.Duration // how long the attempt took
}

// Err returns the attempt's error as an in-process operation would see it: nil
// for a 2xx, else a StatusError.
func (r Result) Err() error {
	if r.Status >= 200 && r.Status < 300 {
		return nil
	}
	return &StatusError{Status: r.Status, Hint: r.RetryAfter}
}

// StatusError is an error carrying an HTTP status and, when Hint > 0, a
// server's hint, found by retry.StatusCode and retry.RetryAfter.
type StatusError struct {
	Status int
	Hint   time.Duration
}

// Error returns "status 503".
func (e *StatusError) Error() string { return "status " + strconv.Itoa(e.Status) }

// HTTPStatusCode returns e.Status.
func (e *StatusError) HTTPStatusCode() int { return e.Status }

// RetryAfter returns e.Hint, or -1 (no hint) when it is 0.
func (e *StatusError) RetryAfter() time.Duration {
	if e.Hint == 0 {
		return -1
	}
	return e.Hint
}

// StepCases returns the rules of the decision step, one case each. Each call
// returns new values.
func StepCases() []StepCase {
	const ms = time.Millisecond
	exact := func(base time.Duration) backoff.Policy { return backoff.Policy{Base: base, Jitter: backoff.NoJitter} }
	fixed := func(base time.Duration) backoff.Policy {
		return backoff.Policy{Kind: backoff.Fixed, Base: base, Jitter: backoff.NoJitter}
	}
	s503 := []Result{{Status: 503, Took: 10 * ms}}
	return []StepCase{
		{"attempts run out", retry.Policy{MaxAttempts: 3, Backoff: exact(100 * ms)}, s503,
			[]time.Duration{100 * ms, 200 * ms}, retry.ErrAttemptsExhausted},
		{"a zero field takes its default, field by field", retry.Policy{Backoff: backoff.Policy{Jitter: backoff.NoJitter}}, s503,
			[]time.Duration{100 * ms, 200 * ms}, retry.ErrAttemptsExhausted},
		{"a success ends it", retry.Policy{MaxAttempts: 5, Backoff: exact(100 * ms)},
			[]Result{{Status: 503}, {Status: 502}, {Status: 200}}, []time.Duration{100 * ms, 200 * ms}, nil},
		{"the delay is capped at Max", retry.Policy{MaxAttempts: 5, Backoff: backoff.Policy{Base: time.Second, Max: 3 * time.Second, Jitter: backoff.NoJitter}}, s503,
			[]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}, retry.ErrAttemptsExhausted},
		{"a status not retried stops at once", retry.Policy{MaxAttempts: 5}, []Result{{Status: 400}},
			nil, retry.ErrNotRetryable},
		{"only the listed statuses are retried", retry.Policy{MaxAttempts: 5, RetryableStatusCodes: []int{503}}, []Result{{Status: 429}},
			nil, retry.ErrNotRetryable},
		{"a hint is a floor, beyond the backoff's Max", retry.Policy{MaxAttempts: 3, Budget: time.Minute, Backoff: backoff.Policy{Base: 100 * ms, Max: time.Second, Jitter: backoff.NoJitter}},
			[]Result{{Status: 503, RetryAfter: 5 * time.Second}}, []time.Duration{5 * time.Second, 5 * time.Second}, retry.ErrAttemptsExhausted},
		{"a backoff longer than the hint wins", retry.Policy{MaxAttempts: 2, Backoff: fixed(3 * time.Second)},
			[]Result{{Status: 429, RetryAfter: time.Second}}, []time.Duration{3 * time.Second}, retry.ErrAttemptsExhausted},
		{"a hint that does not fit the budget stops now", retry.Policy{MaxAttempts: 5, Budget: 10 * time.Second, Backoff: fixed(ms)},
			[]Result{{Status: 503, RetryAfter: 30 * time.Second}}, nil, retry.ErrBudgetExhausted},
		{"without a budget a hint is capped at DefaultMaxRetryAfter", retry.Policy{MaxAttempts: 2, Backoff: fixed(ms)},
			[]Result{{Status: 503, RetryAfter: time.Hour}}, []time.Duration{retry.DefaultMaxRetryAfter}, retry.ErrAttemptsExhausted},
		{"the hint's cap is the policy's MaxRetryAfter", retry.Policy{MaxAttempts: 2, MaxRetryAfter: 2 * time.Minute, Backoff: fixed(ms)},
			[]Result{{Status: 503, RetryAfter: time.Hour}}, []time.Duration{2 * time.Minute}, retry.ErrAttemptsExhausted},
		// Calls take 100ms and delays are 300ms: after the third call 900ms
		// have passed, and a fourth would end at 1.3s.
		{"the budget counts the measured call time", retry.Policy{MaxAttempts: 10, Budget: time.Second, Backoff: fixed(300 * ms)},
			[]Result{{Status: 503, Took: 100 * ms}}, []time.Duration{300 * ms, 300 * ms}, retry.ErrBudgetExhausted},
		{"the budget counts CallTime when set", retry.Policy{MaxAttempts: 10, Budget: time.Second, CallTime: 500 * ms, Backoff: fixed(200 * ms)},
			[]Result{{Status: 503}}, []time.Duration{200 * ms, 200 * ms}, retry.ErrBudgetExhausted},
		{"a call that spent the budget stops it", retry.Policy{MaxAttempts: 10, Budget: time.Second, Backoff: fixed(ms)},
			[]Result{{Status: 503, Took: 2 * time.Second}}, nil, retry.ErrBudgetExhausted},
	}
}
