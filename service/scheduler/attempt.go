package scheduler

import (
	"context"
	"errors"
	"time"

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
	if f, stop := precheck(t, p, start); stop {
		s.queue(t, f)
		return
	}
	host, held := s.admit(ctx, t, hostSetting)
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
	tr, span := s.startAttempt(t)
	res := s.send(ctx, t, p.AttemptTimeout, tr)
	s.report(ctx, host, p, &res)
	if span != nil {
		endAttempt(span, t, &res, p)
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

// send makes t's attempt. A policy's AttemptTimeout shortens the
// dispatcher's own bound for its tasks; it cannot lengthen it, since the
// lease was sized to that bound.
func (s *Scheduler) send(ctx context.Context, t *store.Task, timeout time.Duration, tr dispatch.Trace) dispatch.Result {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return s.disp.Send(ctx, dispatch.Request{
		Method:         t.Method,
		URL:            t.TargetURL,
		Headers:        t.Headers,
		Body:           t.Body,
		BodyRef:        t.BodyRef, // read from the blob store, and streamed, at each attempt
		IdempotencyKey: t.IdempotencyKey,
		Trace:          tr,
	})
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
