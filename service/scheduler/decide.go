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
// step. What follows a failure is the root package's decision step
// (retry.Policy.Decide), so that a task is retried exactly as retry.Do would
// retry the same call; Decide only translates between the task and that
// step. Decorrelated jitter continues from t.PrevDelay, which the store
// keeps, so a restart does not restart the sequence. src, when not nil, is
// drawn from instead of p.Rand (a policy decoded from JSON has none); it
// must be safe for concurrent use. An answer with Retrykit-Retry: never
// (res.NoRetry) that is no success fails the task, whatever its status
// and the policy: the target asked for no more retries.
func Decide(t *store.Task, p *retry.Policy, res *dispatch.Result, now time.Time, src backoff.Source) store.Finish {
	f, _ := decide(t, p, res, now, src)
	return f
}

// decide is Decide, also returning why the task stops when it does (the
// decision step's Verdict.Stop: retry.ErrNotRetryable for FAILED, the
// reason it gave up for EXHAUSTED), for the attempt's event.
func decide(t *store.Task, p *retry.Policy, res *dispatch.Result, now time.Time, src backoff.Source) (store.Finish, error) {
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
	class := retry.NoRetry
	switch res.Outcome(p) {
	case dispatch.Success:
		f.Status = store.Succeeded
		return f, nil
	case dispatch.Retry:
		class = retry.Retry
	}
	if res.NoRetry {
		// The target knows best whether its request may come again (it
		// acted on it, or never will): its word ends the task before the
		// policy classifies the answer or counts what is left.
		f.Status = store.Failed
		f.LastError = msg + " (the target asked for no more retries: " + dispatch.HeaderRetry + ": never)"
		return f, retry.ErrNotRetryable
	}
	if src != nil {
		q := *p
		q.Rand = src
		p = &q
	}
	v := p.Decide(&retry.Failure{
		Err:       answer{res},
		Class:     class,
		Attempt:   t.AttemptNumber,
		PrevDelay: t.PrevDelay,
		Start:     t.BudgetStart,
		Now:       now,
		Call:      res.Duration,
	})
	f.PrevDelay = v.PrevDelay
	switch v.Stop {
	case nil:
		f.Status = store.Pending
		// Whole milliseconds, rounded up: every store keeps at least that,
		// so the heap and the store agree exactly on when the task is due,
		// and the retry never comes before its delay is over.
		f.NextAttemptAt = store.CeilMillis(now.Add(v.Delay))
	case retry.ErrNotRetryable:
		// The target's own answer says why; FAILED tells it apart from a
		// task that ran out of attempts or time.
		f.Status = store.Failed
	default:
		giveUp(&f, v.Stop)
	}
	return f, v.Stop
}

// answer shows a Result to the decision step as an error: the step reads a
// server's hint and the status from it, not from the Result. It is one
// pointer, so making it an error allocates nothing.
type answer struct{ res *dispatch.Result }

func (a answer) Error() string       { return a.res.Message() }
func (a answer) Unwrap() error       { return a.res.Err }
func (a answer) HTTPStatusCode() int { return a.res.Status }

// RetryAfter returns the response's Retry-After, or -1 (none) without one.
func (a answer) RetryAfter() time.Duration {
	if !a.res.HasRetryAfter {
		return -1
	}
	return a.res.RetryAfter
}

// giveUp marks f EXHAUSTED, saying why in the task's lastError.
func giveUp(f *store.Finish, reason error) {
	f.Status = store.Exhausted
	if f.LastError == "" {
		f.LastError = reason.Error()
	} else {
		f.LastError += " (" + reason.Error() + ")"
	}
}

// precheck is asked before a claimed task is sent. It returns a finish
// without a call when the policy already forbids the attempt: attempts lost
// to expired leases were counted and may have used up the allowance, or the
// budget ran out while the task waited (retryd was down, say).
func precheck(t *store.Task, p *retry.Policy, now time.Time) (store.Finish, bool) {
	reason := p.Admit(t.AttemptNumber, t.BudgetStart, now)
	if reason == nil {
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

// unsent hands back t, claimed but not sent because the store would not
// count its attempt as possibly sent (store.SendHorizon: the store out of
// reach, or this instance taken for dead while it claimed): PENDING, due at
// once, its attempt not charged, as a lease taken back unsent is. Charged,
// a claim refused again and again (until a store back in reach, or the
// instance's joining again) exhausted tasks never sent.
func unsent(t *store.Task, why string, now time.Time) store.Finish {
	f := notSent(t, store.Pending, why, now)
	f.Held, f.NextAttemptAt = true, now
	return f
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
