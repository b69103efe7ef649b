package retry

import (
	"time"
)

// DefaultMaxRetryAfter caps a server's hint when a Policy has neither a
// Budget nor a MaxRetryAfter of its own: a hint longer than this is obeyed
// for this long. It guards against a server that asks for a day.
const DefaultMaxRetryAfter = 5 * time.Minute

// Failure is one failed attempt, as the decision step sees it. Every executor
// fills one after each failure: Do, the retryd scheduler and kafkaretry.
type Failure struct {
	// Err is what the attempt returned; its hint (RetryAfter) and HTTP status
	// are read from it.
	Err error
	// Class, when not Unknown, is the attempt's classification, already made
	// by the executor; Unknown means "classify Err with the Policy".
	Class Decision
	// Attempt is the attempt that failed, 1 for the first call.
	Attempt int
	// PrevDelay is Verdict.PrevDelay of the previous step, 0 before the first.
	PrevDelay time.Duration
	// Start is when the budget began (the first call, usually) and Now is
	// the end of this attempt. They are read only when the Policy has a
	// Budget or there is a Deadline.
	Start, Now time.Time
	// Call is how long this attempt took; read only with a Budget and no
	// CallTime.
	Call time.Duration
	// Deadline, when not zero, is the caller's own deadline: a retry that
	// could not even begin before it stops now.
	Deadline time.Time
}

// Verdict is the decision step's answer: retry after Delay, or stop.
type Verdict struct {
	// Stop is nil to retry, else why not: ErrNotRetryable,
	// ErrAttemptsExhausted, ErrBudgetExhausted or ErrQuotaExhausted.
	Stop error
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// PrevDelay is the backoff's own delay (before any hint), to carry into
	// the next Failure: decorrelated jitter grows from it.
	PrevDelay time.Duration
}

// Delayer is implemented by a Classifier that chooses the wait before some
// retries itself (a 429 waits longer, say). The wait it chooses replaces the
// backoff's for that retry; a server's hint is still a floor on it, and the
// budget still applies.
type Delayer interface {
	// RetryDelay returns the wait before retrying err after attempt n, or
	// ok false to leave it to the backoff.
	RetryDelay(err error, n int) (d time.Duration, ok bool)
}

// Decide is the decision step: every rule about what follows a failed
// attempt, written once. In order:
//
//  1. With a Budget, a budget already spent stops the execution.
//  2. The error is classified (unless f.Class already is); one not retried
//     stops it.
//  3. When f.Attempt has used up MaxAttempts, it stops.
//  4. The wait is the backoff's delay for retry f.Attempt, or the one a
//     Delayer classifier chose; a server's hint is a floor on it, never cut
//     by the backoff's Max. Without a Budget, a hint is capped at
//     MaxRetryAfter (DefaultMaxRetryAfter when 0).
//  5. With a Budget, when the time spent, plus the wait, plus the expected
//     call time (CallTime, else f.Call) would overrun it, it stops now; the
//     same when the wait would end past f.Deadline.
//  6. With a Quota, a retry takes a token; an empty quota stops it.
//
// Decide draws jitter from p.Rand, and takes from p.Quota when it answers
// retry; it changes nothing else and allocates nothing.
func (p *Policy) Decide(f *Failure) Verdict {
	if p.Budget > 0 && f.Now.Sub(f.Start) >= p.Budget {
		return Verdict{Stop: ErrBudgetExhausted, PrevDelay: f.PrevDelay}
	}
	fx := inspect(f.Err)
	class := f.Class
	if class == Unknown {
		class = p.classify(f.Err, &fx)
	}
	if class != Retry {
		return Verdict{Stop: ErrNotRetryable, PrevDelay: f.PrevDelay}
	}
	if f.Attempt >= p.Attempts() {
		return Verdict{Stop: ErrAttemptsExhausted, PrevDelay: f.PrevDelay}
	}
	v := Verdict{PrevDelay: p.Backoff.Delay(f.Attempt, f.PrevDelay, p.Rand)}
	v.Delay = v.PrevDelay
	if dl, ok := p.Classifier.(Delayer); ok {
		if d, ok := dl.RetryDelay(f.Err, f.Attempt); ok && d >= 0 {
			v.Delay = d
		}
	}
	if hint := fx.hint; fx.hasHint && hint > v.Delay {
		if p.Budget == 0 {
			hint = min(hint, max(p.maxRetryAfter(), v.Delay))
		}
		v.Delay = hint
	}
	if p.Budget > 0 {
		call := p.CallTime
		if call == 0 {
			call = f.Call
		}
		if f.Now.Sub(f.Start)+v.Delay+call > p.Budget {
			v.Stop = ErrBudgetExhausted
			return v
		}
	}
	if !f.Deadline.IsZero() && f.Now.Add(v.Delay).After(f.Deadline) {
		v.Stop = ErrBudgetExhausted
		return v
	}
	if p.Quota != nil && !p.Quota.TryTake() {
		v.Stop = ErrQuotaExhausted
	}
	return v
}

func (p *Policy) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter > 0 {
		return p.MaxRetryAfter
	}
	return DefaultMaxRetryAfter
}

// Admit is the decision step before an attempt that does not follow a
// wait of Decide's: it returns nil when attempt n may begin at now, or why
// not (ErrAttemptsExhausted, ErrBudgetExhausted). An executor that keeps
// tasks for later (retryd, after a restart or a lost lease) asks it, since
// attempts and time may have run out while the task waited. Admit says
// whether; an executor with a Limiter then asks it when (Limiter.Reserve),
// as Do does before every attempt.
func (p *Policy) Admit(n int, start, now time.Time) error {
	switch {
	case n > p.Attempts():
		return ErrAttemptsExhausted
	case p.Budget > 0 && now.Sub(start) >= p.Budget:
		return ErrBudgetExhausted
	}
	return nil
}
