package scheduler

import (
	"strconv"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// Decide turns the result of attempt t.AttemptNumber into the task's next
// step, by the same rules retry.Do follows: a success or a non-retryable
// answer ends the task; otherwise the policy's backoff gives the delay
// (decorrelated jitter continuing from t.PrevDelay, which is stored with
// the task so that a restart keeps the sequence), a Retry-After hint
// lengthens it up to the backoff's maximum, and the task is EXHAUSTED when
// the attempts are used up or when the time spent since t.BudgetStart plus
// the delay plus the expected call time (the policy's, else this attempt's)
// would overrun the budget.
func Decide(t *store.Task, p *retry.Policy, res *dispatch.Result, now time.Time, src backoff.Source) store.Finish {
	msg := res.Message()
	f := store.Finish{
		TaskID:  t.ID,
		Version: t.Version,
		Attempt: store.Attempt{
			AttemptNumber:  t.AttemptNumber,
			StartedAt:      res.Start,
			Duration:       res.Duration,
			ResponseStatus: res.Status,
			ErrorMessage:   msg,
			ResponseBody:   res.Body,
		},
		PrevDelay:  t.PrevDelay,
		LastError:  msg,
		LastStatus: res.Status,
		Now:        now,
	}
	switch res.Outcome(p) {
	case dispatch.Success:
		f.Status = store.Succeeded
		return f
	case dispatch.Fail:
		f.Status = store.Failed
		return f
	}
	if t.AttemptNumber >= p.Attempts() {
		return giveUp(f, retry.ErrAttemptsExhausted)
	}
	delay := p.Backoff.Delay(t.AttemptNumber, t.PrevDelay, src)
	f.PrevDelay = delay
	if res.HasRetryAfter && res.RetryAfter > delay {
		delay = res.RetryAfter
		if p.Backoff.Max > 0 && delay > p.Backoff.Max {
			delay = p.Backoff.Max
		}
	}
	if p.Budget > 0 {
		call := p.CallTime
		if call == 0 {
			call = res.Duration
		}
		if now.Sub(t.BudgetStart)+delay+call > p.Budget {
			return giveUp(f, retry.ErrBudgetExhausted)
		}
	}
	f.Status = store.Pending
	// Whole milliseconds, rounded up: every store keeps at least that, so
	// the heap and the store agree exactly on when the task is due, and the
	// retry never comes before its delay is over.
	f.NextAttemptAt = store.CeilMillis(now.Add(delay))
	return f
}

// giveUp marks f EXHAUSTED, saying why in the task's lastError.
func giveUp(f store.Finish, reason error) store.Finish {
	f.Status = store.Exhausted
	if f.LastError == "" {
		f.LastError = reason.Error()
	} else {
		f.LastError += " (" + reason.Error() + ")"
	}
	return f
}

// precheck is asked before a claimed task is sent. It returns a finish
// without a call when the policy already forbids the attempt: attempts lost
// to expired leases were counted and may have used up the allowance, or the
// budget ran out while the task waited (retryd was down, say).
func precheck(t *store.Task, p *retry.Policy, now time.Time) (store.Finish, bool) {
	var reason error
	switch {
	case t.AttemptNumber > p.Attempts():
		reason = retry.ErrAttemptsExhausted
	case p.Budget > 0 && now.Sub(t.BudgetStart) > p.Budget:
		reason = retry.ErrBudgetExhausted
	default:
		return store.Finish{}, false
	}
	return notSent(t, store.Exhausted, reason.Error()+" before attempt "+strconv.Itoa(t.AttemptNumber), now), true
}

// notSent finishes t without a call; AttemptNumber 0 keeps the attempt log
// free of an attempt that was never made.
func notSent(t *store.Task, status store.Status, why string, now time.Time) store.Finish {
	lastErr := why
	if t.LastError != "" {
		lastErr = t.LastError + " (" + why + ")"
	}
	return store.Finish{
		TaskID:     t.ID,
		Version:    t.Version,
		Status:     status,
		PrevDelay:  t.PrevDelay,
		LastError:  lastErr,
		LastStatus: t.LastStatus,
		Now:        now,
	}
}

// release hands back a task whose attempt was cut short by shutdown: it is
// due again at once, and the interrupted attempt stays counted and logged
// (the target may have seen it).
func release(t *store.Task, res *dispatch.Result, now time.Time) store.Finish {
	const msg = "interrupted: retryd shut down during the attempt"
	return store.Finish{
		TaskID:  t.ID,
		Version: t.Version,
		Attempt: store.Attempt{
			AttemptNumber: t.AttemptNumber,
			StartedAt:     res.Start,
			Duration:      res.Duration,
			ErrorMessage:  msg,
		},
		Status:        store.Pending,
		NextAttemptAt: now.Truncate(time.Millisecond),
		PrevDelay:     t.PrevDelay,
		LastError:     msg,
		Now:           now,
	}
}
