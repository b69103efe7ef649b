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
	s.rec.Lag(start.Sub(t.NextAttemptAt))

	p, err := s.policy(ctx, t.Tenant, t.PolicyID)
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
	res := s.send(ctx, t, p.AttemptTimeout)
	now := time.Now()
	if ctx.Err() != nil && errors.Is(res.Err, context.Canceled) {
		s.queue(t, release(t, &res, now))
		return
	}
	s.queue(t, Decide(t, p, &res, now, s.cfg.Rand))
}

// send makes t's attempt. A policy's AttemptTimeout shortens the
// dispatcher's own bound for its tasks; it cannot lengthen it, since the
// lease was sized to that bound.
func (s *Scheduler) send(ctx context.Context, t *store.Task, timeout time.Duration) dispatch.Result {
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
		IdempotencyKey: t.IdempotencyKey,
	})
}

// finished is an outcome waiting for its group commit.
type finished struct {
	f    store.Finish
	task *store.Task
}

// queue hands f to the committer. The channel is bounded, so a slow store
// slows the workers down instead of piling outcomes up in memory.
func (s *Scheduler) queue(t *store.Task, f store.Finish) {
	s.commits <- finished{f: f, task: t}
}
