package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do calls op until it succeeds or p says to stop, and returns nil or an
// *Error that wraps op's last error and the reason it stopped. An invalid p
// is an error before any call, and so is a ctx that has already ended.
//
// op's context is ctx, with a deadline when p has a Budget (the end of the
// budget) or an AttemptTimeout (the end of the attempt); that context ends
// when the attempt does, so a value that must outlive the call (a stream, a
// response body) must not be tied to it. Do is safe to call from many
// goroutines with one Policy.
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	return exec(ctx, &p, op, nil)
}

// DoValue is Do for an operation that returns a value: it returns the value
// of the first successful call, or the zero T and the error Do would return.
func DoValue[T any](ctx context.Context, p Policy, op func(context.Context) (T, error)) (T, error) {
	var v T
	err := exec(ctx, &p, func(ctx context.Context) (err error) {
		v, err = op(ctx)
		return err
	}, nil)
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// DoValueIf is DoValue that also retries a call that succeeds with a value
// retryIf rejects, as if it had failed with ErrRejected (which is retried
// whatever the classifier says). When the policy stops while values are
// still rejected, DoValueIf returns the last value with the *Error.
func DoValueIf[T any](ctx context.Context, p Policy, op func(context.Context) (T, error), retryIf func(T) bool) (T, error) {
	var v T
	err := exec(ctx, &p, func(ctx context.Context) (err error) {
		if v, err = op(ctx); err == nil && retryIf(v) {
			return ErrRejected
		}
		return err
	}, nil)
	if err != nil && !errors.Is(err, ErrRejected) {
		var zero T
		return zero, err
	}
	return v, err
}

// Attempt is what an operation run by DoAttempt knows of its execution.
type Attempt struct {
	Number  int           // 1 for the first call
	Elapsed time.Duration // from the first call's start to this one's
	LastErr error         // the previous attempt's error; nil on the first
}

// DoAttempt is DoValue for an operation that wants to know which attempt it
// is on, how long the execution has run, and why the previous attempt
// failed: it receives them as an Attempt.
func DoAttempt[T any](ctx context.Context, p Policy, op func(context.Context, Attempt) (T, error)) (T, error) {
	var v T
	err := exec(ctx, &p, nil, func(ctx context.Context, a Attempt) (err error) {
		v, err = op(ctx, a)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// ErrRejected is the error of an attempt whose value DoValueIf's predicate
// rejected.
var ErrRejected = errors.New("value rejected")

// exec runs one execution: every Do function comes here, with op, or with
// opA (DoAttempt's), which is handed its Attempt and so has the clock read
// for each attempt even when nothing else needs it. The first attempt of a
// plain policy (no budget, timeout or observer) takes a path of its own,
// which does no more than it must: the success path of Do is a handful of
// nanoseconds, and setting up for retries would double it.
func exec(ctx context.Context, p *Policy, op func(context.Context) error, opA func(context.Context, Attempt) error) error {
	// OR-ing durations is negative when one of them is; shifting that
	// right by 63 gives all ones for a negative, 0 else, so one comparison
	// tests a budget, a timeout and a negative field at once (a branch
	// fewer pays for the Limiter's).
	if opA != nil || uint64(p.Budget|p.AttemptTimeout)|uint64((int64(p.MaxAttempts)|int64(p.CallTime|p.MaxRetryAfter))>>63) != 0 ||
		p.Observer != nil || p.Logger != nil || p.RetryableStatusCodes != nil || p.Limiter != nil ||
		!p.Backoff.Valid() || ctx.Err() != nil {
		return start(ctx, p, op, opA)
	}
	err := op(ctx)
	if err == nil {
		if p.Quota != nil {
			p.Quota.Refill()
		}
		return nil
	}
	return loop(ctx, p, op, nil, err)
}

// start begins an execution that needs more than a plain first attempt:
// the full validation, an ended context, or the loop's set-up.
func start(ctx context.Context, p *Policy, op func(context.Context) error, opA func(context.Context, Attempt) error) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("retry: invalid policy: %w", err)
	}
	if ctx.Err() != nil {
		var r run
		return r.stop(ctx, p, ErrCancelled, nil, time.Time{}, false)
	}
	return loop(ctx, p, op, opA, nil)
}

// loop runs the attempts of an execution; failed, when not nil, is the
// error of a first attempt already made.
func loop(ctx context.Context, p *Policy, op func(context.Context) error, opA func(context.Context, Attempt) error, failed error) error {
	var r run
	r.begin(p, opA != nil)
	opCtx, end := ctx, context.CancelFunc(nil)
	if p.Budget > 0 {
		opCtx, end = context.WithTimeout(ctx, p.Budget)
		defer end()
	}
	var lastErr error
	for {
		err, class := failed, Unknown
		if err == nil {
			if p.Limiter != nil {
				if err := r.admit(ctx, p, lastErr); err != nil {
					return err
				}
			}
			class, err = r.call(opCtx, p, op, opA, lastErr)
			if p.Limiter != nil {
				r.report(ctx, p, err)
			}
			if err == nil {
				r.succeeded(ctx, p)
				return nil
			}
		}
		if err == ErrRejected {
			class = Retry
		}
		lastErr, failed = err, nil
		if err = r.failed(ctx, p, err, class); err != nil {
			return err
		}
	}
}

// call makes one attempt under opCtx, within the policy's AttemptTimeout.
// An attempt that timeout cut short is classified Retry: the timeout is the
// policy's, not the caller's.
func (r *run) call(opCtx context.Context, p *Policy, op func(context.Context) error, opA func(context.Context, Attempt) error, lastErr error) (Decision, error) {
	actx := opCtx
	if p.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(opCtx, p.AttemptTimeout)
		defer cancel()
	}
	var err error
	if opA != nil {
		err = opA(actx, Attempt{Number: r.attempt + 1, Elapsed: r.callStart.Sub(r.start), LastErr: lastErr})
	} else {
		err = op(actx)
	}
	if err != nil && actx != opCtx && actx.Err() != nil && opCtx.Err() == nil && !IsPermanent(err) {
		return Retry, err
	}
	return Unknown, err
}

// run is the state of one execution: it lives on the caller's stack, so a
// shared Policy is never written to. It holds no pointer (the Policy and the
// context are passed along instead): escape analysis does not tell a
// struct's fields apart, and the times it hands to Decide would take a
// Policy kept here to the heap with them, an allocation per execution.
type run struct {
	attempt int // attempts made
	prev    time.Duration
	// timed: the clock is read around each attempt (a budget, an observer,
	// DoAttempt). Reading it costs more than the rest of the success path.
	timed            bool
	start, callStart time.Time
	admitted         time.Time // when Policy.Limiter let the attempt go
}

func (r *run) begin(p *Policy, timed bool) {
	r.timed = timed || p.Budget > 0 || p.Observer != nil || p.Logger != nil
	if r.timed {
		r.startClock(p)
	}
}

func (r *run) startClock(p *Policy) {
	r.start = clock(p).Now()
	r.callStart = r.start
}

// clock returns the policy's clock. It is looked up on each use rather than
// kept in run, for the reason run's comment gives.
func clock(p *Policy) Clock {
	if p.Clock != nil {
		return p.Clock
	}
	return realClock{}
}

func (r *run) succeeded(ctx context.Context, p *Policy) {
	r.attempt++
	if p.Quota != nil || r.timed {
		r.settle(ctx, p)
	}
}

// settle is what a success costs beyond counting it, kept apart so that
// succeeded stays small enough to be inlined.
func (r *run) settle(ctx context.Context, p *Policy) {
	if p.Quota != nil {
		p.Quota.Refill()
	}
	if r.timed {
		r.observe(ctx, p, Event{Outcome: Succeeded}, clock(p).Now())
	}
}

// failed asks the decision step what follows the failed attempt: it
// returns the error that ends the execution, or sleeps and returns nil for
// another attempt.
func (r *run) failed(ctx context.Context, p *Policy, err error, class Decision) error {
	r.attempt++
	deadline, hasDeadline := ctx.Deadline()
	var now time.Time
	if r.timed || hasDeadline {
		now = clock(p).Now()
	}
	if hasDeadline {
		// The caller's deadline is on the real clock, whatever clock the
		// policy has: carry it over to the policy's.
		left := time.Until(deadline)
		if left <= 0 {
			// Passed, even if the context's own timer has yet to fire: the
			// error op saw may come from a server that noticed first.
			return r.stop(ctx, p, ErrCancelled, err, now, false)
		}
		deadline = now.Add(left)
	}
	if ctx.Err() != nil {
		return r.stop(ctx, p, ErrCancelled, err, now, false)
	}
	f := Failure{Err: err, Class: class, Attempt: r.attempt, PrevDelay: r.prev}
	if r.timed || hasDeadline {
		// Time arithmetic is a good part of what a retry costs; without a
		// budget or a deadline nothing reads these.
		f.Start, f.Now, f.Call = r.start, now, now.Sub(r.callStart)
	}
	if hasDeadline {
		f.Deadline = deadline
	}
	v := p.Decide(&f)
	r.prev = v.PrevDelay
	if v.Stop != nil {
		return r.stop(ctx, p, v.Stop, err, now, false)
	}
	if r.timed {
		r.observe(ctx, p, Event{Outcome: Retrying, Err: err, Delay: v.Delay}, now)
	}
	if serr := clock(p).Sleep(ctx, v.Delay); serr != nil {
		// The attempt was heard of as Retrying already: this event only
		// tells why no other follows.
		return r.stop(ctx, p, ErrCancelled, err, now, r.timed)
	}
	if r.timed {
		r.callStart = now.Add(v.Delay)
	}
	return nil
}

// stop ends the execution for reason; repeated says the last attempt's
// Retrying event was heard already (see Event.Repeated).
func (r *run) stop(ctx context.Context, p *Policy, reason error, err error, now time.Time, repeated bool) error {
	e := &Error{Reason: reason, Attempts: r.attempt, Err: err}
	if reason == ErrCancelled {
		e.ctxErr, e.Cause = ctx.Err(), context.Cause(ctx)
		if e.ctxErr == nil { // the deadline passed, the timer has yet to fire
			e.ctxErr, e.Cause = context.DeadlineExceeded, context.DeadlineExceeded
		}
	}
	r.observe(ctx, p, Event{Outcome: GaveUp, Err: err, Reason: reason, Repeated: repeated}, now)
	return e
}

// observe completes e and hands it to the policy's logger and observer.
func (r *run) observe(ctx context.Context, p *Policy, e Event, now time.Time) {
	if p.Logger == nil && p.Observer == nil {
		return
	}
	e.Name, e.Attempt, e.MaxAttempts = p.Name, r.attempt, p.Attempts()
	if !now.IsZero() && r.attempt > 0 {
		e.Duration, e.Elapsed, e.Start = now.Sub(r.callStart), now.Sub(r.start), r.callStart
	}
	if p.Logger != nil {
		logObserver{p.Logger}.Observe(ctx, e)
	}
	if p.Observer != nil {
		p.Observer.Observe(ctx, e)
	}
}
