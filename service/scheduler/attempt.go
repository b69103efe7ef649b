package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// attempt makes claimed task t's attempt and queues its outcome for the
// next group commit. ctx is cancelled only when shutdown's grace runs out.
func (s *Scheduler) attempt(ctx context.Context, t *store.Task) {
	defer func() {
		s.busy.Add(-1)
		s.workers.Done()
		signal(s.freeC)
	}()
	if wait := time.Until(t.NextAttemptAt); wait > 0 {
		// Claimed ahead of time (see lookahead): hold it until due.
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}
	start := time.Now()
	s.rec.Lag(t.Tenant, start.Sub(t.NextAttemptAt))

	p, hostSetting, err := s.policy(ctx, t.Tenant, t.PolicyID)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: the lease expires and the task is claimed again
		}
		s.log.Error("scheduler: task's policy unusable; failing the task", "task", t.ID, "policy", t.PolicyID, "error", err)
		s.queue(t, notSent(t, store.Failed, "policy "+t.PolicyID+": "+err.Error(), time.Now()))
		return
	}
	// A paused destination holds its tasks before their budget is
	// checked: a task waits out a pause, and a budget spent meanwhile
	// ends it only once the destination is active again.
	target := t.TargetURL
	var call *gate.Call
	if destination.IsTarget(target) {
		if call = s.destination(ctx, t); call == nil {
			return
		}
		target = call.URL
	}
	if f, stop := precheck(t, p, start); stop {
		s.queue(t, f)
		return
	}
	host, held := s.admit(ctx, t, hostSetting, target)
	if held {
		return
	}
	if s.horizon != nil {
		// The store must know that this attempt may be sent before it
		// is: should this process die, a task it never sent is then
		// taken back without its attempt charged (store.SendHorizon).
		if err := s.horizon.MaySend(ctx, t); err != nil {
			if ctx.Err() != nil {
				return // shutting down: the lease is taken back
			}
			s.log.Warn("scheduler: could not record the send horizon; the attempt waits", "task", t.ID, "error", err)
			s.queue(t, unsent(t, "not sent: "+err.Error(), time.Now()))
			return
		}
	}
	// One deadline bounds the attempt whole, a destination's token fetch
	// and rate wait with its send: the lease was sized to it. A plain
	// task's send is bounded by its dispatcher already, so it needs a
	// deadline of its own only for a policy's shorter AttemptTimeout:
	// the attempt path makes no context and timer it does not need.
	actx := ctx
	if call != nil || p.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, s.bound(call, p.AttemptTimeout))
		defer cancel()
	}
	req, early := s.request(actx, t, call)
	if early == nil && call != nil {
		// The destination's rate token is taken last, once the request is
		// ready, so that it goes at its token's time: a token spent late
		// would crowd the next second.
		if h := call.Acquire(actx); h != nil {
			s.queue(t, holdBack(t, h.Until, time.Now(), h.Reason))
			return
		}
	}
	tr, span := s.startAttempt(t)
	res := s.send(actx, req, tr, call, early)
	s.report(ctx, host, p, &res)
	// Only what the target did counts for its destination's health: not
	// a failure of this task's own (a sealed header that does not open),
	// nor one of a shutdown.
	judged := early == nil && ctx.Err() == nil
	if call != nil && call.Done(ctx, &res, !judged || res.Outcome(p) == dispatch.Success) {
		// The target refused a stale OAuth2 token: the token is dropped
		// and the task goes again at once, this attempt not charged.
		if span != nil {
			endAttempt(span, t, target, &res, p)
		}
		s.queue(t, holdBack(t, time.Now(), time.Now(), gate.HeldToken))
		return
	}
	if span != nil {
		endAttempt(span, t, target, &res, p)
	}
	now := time.Now()
	b := finished{task: t, cause: res.Err, maxAttempts: p.Attempts()}
	if ctx.Err() != nil && errors.Is(res.Err, context.Canceled) {
		b.f = release(t, &res, now)
	} else {
		b.f, b.stop = decide(t, p, &res, now, s.cfg.Rand)
	}
	s.commits <- b
}

// request returns the request of t's attempt: its headers opened and,
// when its task names a destination, dressed by call. early is the
// attempt's result when it fails before it can be sent (a sealed header
// that does not open, an OAuth2 token endpoint that fails): charged like a
// connection refused, nothing sent.
func (s *Scheduler) request(ctx context.Context, t *store.Task, call *gate.Call) (req dispatch.Request, early *dispatch.Result) {
	req = dispatch.Request{
		Method:         t.Method,
		URL:            t.TargetURL,
		Body:           t.Body,
		BodyRef:        t.BodyRef, // read from the blob store, and streamed, at each attempt
		IdempotencyKey: t.IdempotencyKey,
		// BudgetStart is when the first attempt of the task's current run
		// was due: its creation (or notBefore), or its last redrive, which
		// starts the attempt count afresh too.
		TaskID:         t.ID,
		Attempt:        t.AttemptNumber,
		FirstAttemptAt: t.BudgetStart,
	}
	h, err := destination.OpenHeaders(s.cfg.Keys, t.Tenant, t.ID, t.Headers)
	if err != nil {
		return req, &dispatch.Result{Start: time.Now(), Err: fmt.Errorf("a sealed header does not open: %w", err)}
	}
	req.Headers = h
	if call != nil {
		if req, err = call.Request(ctx, t, req); err != nil {
			return req, &dispatch.Result{Start: time.Now(), Err: err}
		}
	}
	return req, nil
}

// bound is how long an attempt may take: the dispatcher's timeout, or its
// destination's, shortened by the policy's AttemptTimeout; never longer
// than the lease was sized to.
func (s *Scheduler) bound(call *gate.Call, policy time.Duration) time.Duration {
	d := s.disp.Timeout()
	if call != nil && call.Timeout() > 0 {
		d = call.Timeout()
	}
	if policy > 0 && policy < d {
		d = policy
	}
	return d
}

// send makes the attempt of req, traced as tr, through call's dispatcher
// when its task names a destination, within ctx's deadline; early, when
// not nil, is the result of an attempt that could not be sent.
func (s *Scheduler) send(ctx context.Context, req dispatch.Request, tr dispatch.Trace, call *gate.Call, early *dispatch.Result) dispatch.Result {
	if early != nil {
		return *early
	}
	req.Trace = tr
	disp := s.disp
	if call != nil {
		disp = call.Dispatcher()
	}
	return disp.Send(ctx, req)
}

// destination admits t, whose target is a destination, through the gate:
// the call to make, or nil when t was handed back (held: paused, disabled,
// the destination unreadable) or failed (no such destination).
func (s *Scheduler) destination(ctx context.Context, t *store.Task) *gate.Call {
	now := time.Now()
	if s.cfg.Destinations == nil {
		s.queue(t, notSent(t, store.Failed, "the task names a destination, and this retryd has none configured", now))
		return nil
	}
	call, hold, err := s.cfg.Destinations.Admit(ctx, t)
	switch {
	case err != nil:
		s.queue(t, notSent(t, store.Failed, err.Error(), now))
	case hold != nil:
		s.queue(t, holdBack(t, hold.Until, now, hold.Reason))
	}
	return call
}

// finished is an outcome waiting for its group commit, with what the
// attempt's event needs beyond the store's finish.
type finished struct {
	f    store.Finish
	task *store.Task
	// forgone marks the hand-back of a task whose create failed (Forgo):
	// the store may not have it, or have it from an earlier request.
	forgone bool
	// stop is why an attempt's task stops, from the decision step:
	// retry.ErrNotRetryable (FAILED), retry.ErrAttemptsExhausted,
	// retry.ErrBudgetExhausted… (EXHAUSTED); nil otherwise.
	stop        error
	cause       error // the transport's error, when no response came
	maxAttempts int   // the policy's Attempts(); 0 when no policy was at hand
}

// queue hands f, a finish without an attempt's details, to the committer.
// The channel is bounded, so a slow store slows the workers down instead of
// piling outcomes up in memory.
func (s *Scheduler) queue(t *store.Task, f store.Finish) {
	s.commits <- finished{f: f, task: t}
}
