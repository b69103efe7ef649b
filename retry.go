package retry

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// Do calls op until it succeeds or p says to stop, and returns nil or an
// *Error that wraps op's last error and the reason it stopped. op receives
// ctx unchanged. Do is safe to call from many goroutines with one Policy.
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	r := run{p: &p}
	r.begin()
	for {
		err := op(ctx)
		if err == nil {
			r.succeeded()
			return nil
		}
		if err = r.failed(ctx, err); err != nil {
			return err
		}
	}
}

// DoValue is Do for an operation that returns a value: it returns the value
// of the first successful call, or the zero T and the error Do would return.
func DoValue[T any](ctx context.Context, p Policy, op func(context.Context) (T, error)) (T, error) {
	r := run{p: &p}
	r.begin()
	for {
		v, err := op(ctx)
		if err == nil {
			r.succeeded()
			return v, nil
		}
		if err = r.failed(ctx, err); err != nil {
			var zero T
			return zero, err
		}
	}
}

// run is the state of one execution: it lives on the caller's stack, so a
// shared Policy is never written to.
type run struct {
	p         *Policy
	attempt   int
	prevDelay time.Duration
	start     time.Time // first call's start; read only when there is a Budget
	callStart time.Time // this call's start; likewise
}

func (r *run) begin() {
	if r.p.Budget > 0 {
		// Reading the clock costs more than the rest of the success path;
		// without a budget nothing needs it.
		r.start = r.clock().Now()
		r.callStart = r.start
	}
}

// clock returns the policy's clock. It is looked up on each use rather than
// kept in run: an interface stored in run would make the escape analysis move
// every Policy passed to Do to the heap.
func (r *run) clock() Clock {
	if r.p.Clock != nil {
		return r.p.Clock
	}
	return realClock{}
}

func (r *run) succeeded() {
	if r.p.Quota != nil {
		r.p.Quota.Refill()
	}
}

// failed decides what follows the failed attempt: it returns the error that
// ends the execution, or sleeps and returns nil for another attempt.
func (r *run) failed(ctx context.Context, err error) error {
	p := r.p
	r.attempt++
	deadline, hasDeadline := ctx.Deadline()
	if ctx.Err() != nil || hasDeadline && !time.Now().Before(deadline) {
		// A deadline that has passed is the caller's even before the
		// context's own timer has fired and set ctx.Err: the error the
		// operation saw may have come from a server that noticed first.
		return r.stop(ctx, ErrCancelled, err)
	}
	if p.Classify(err) != Retry {
		return r.stop(ctx, ErrNotRetryable, err)
	}
	if r.attempt >= p.Attempts() {
		return r.stop(ctx, ErrAttemptsExhausted, err)
	}
	delay := p.Backoff.Delay(r.attempt, r.prevDelay, p.Rand)
	r.prevDelay = delay
	// A server's hint is checked against the budget as the server gave it: a
	// wait cut short by the cap would only meet the same refusal again.
	wait := delay
	if hint, ok := RetryAfter(err); ok && hint > delay {
		wait, delay = hint, hint
		if limit := p.Backoff.MaxDelay(); limit > 0 && delay > limit {
			delay = limit
		}
	}
	var elapsed time.Duration
	if p.Budget > 0 {
		now := r.clock().Now()
		elapsed = now.Sub(r.start)
		call := p.CallTime
		if call == 0 {
			call = now.Sub(r.callStart)
		}
		if elapsed+wait+call > p.Budget {
			return r.stop(ctx, ErrBudgetExhausted, err)
		}
		r.callStart = now.Add(delay)
	}
	// Context deadlines are on the real clock, whatever clock the policy has.
	if hasDeadline && time.Now().Add(wait).After(deadline) {
		return r.stop(ctx, ErrBudgetExhausted, err)
	}
	if p.Quota != nil && !p.Quota.TryTake() {
		return r.stop(ctx, ErrQuotaExhausted, err)
	}
	if p.OnRetry != nil {
		p.OnRetry(ctx, Attempt{Name: p.Name, Number: r.attempt, MaxAttempts: p.Attempts(), Err: err, Delay: delay, Elapsed: elapsed})
	}
	r.log(ctx, slog.LevelWarn, "retrying in "+roundDelay(delay).String(), err)
	if serr := r.clock().Sleep(ctx, delay); serr != nil {
		return r.stop(ctx, ErrCancelled, err)
	}
	return nil
}

func (r *run) stop(ctx context.Context, reason error, err error) error {
	e := &Error{Reason: reason, Attempts: r.attempt, Err: err}
	level := slog.LevelWarn
	if reason == ErrCancelled {
		e.Cause = context.Cause(ctx)
		if e.Cause == nil { // the deadline passed, the timer has yet to fire
			e.Cause = context.DeadlineExceeded
		}
		level = slog.LevelInfo
	}
	r.log(ctx, level, "giving up: "+reason.Error(), err)
	return e
}

func (r *run) log(ctx context.Context, level slog.Level, what string, err error) {
	l := r.p.Logger
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	msg := "attempt " + strconv.Itoa(r.attempt) + "/" + strconv.Itoa(r.p.Attempts()) + " failed; " + what
	attrs := []slog.Attr{slog.Any("error", err)}
	if r.p.Name != "" {
		attrs = append(attrs, slog.String("op", r.p.Name))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}

// roundDelay keeps log lines readable: 182ms, not 182.417301ms.
func roundDelay(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
