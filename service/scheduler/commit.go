package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// commitLoop records outcomes in groups: it takes the first waiting outcome,
// gathers more (see gather), and writes them in one durable TaskFinish.
// While one group is being written the next one gathers, so the store's
// fsyncs are shared by many attempts. It returns once s.commits is closed
// and drained.
func (s *Scheduler) commitLoop(ctx context.Context) {
	batch := make([]finished, 0, s.cfg.CommitBatch)
	fs := make([]store.Finish, 0, s.cfg.CommitBatch) // reused: the store keeps none of it once TaskFinish returns
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var wrote time.Duration // how long the last group's write took
	for {
		first, ok := <-s.commits
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		start := time.Now()
		open := s.gather(&batch, timer, newGroupClock(start, s.cfg.CommitWait, s.ahead.get(start), wrote))
		began := time.Now()
		s.record(ctx, batch, fs)
		wrote = time.Since(began)
		if !open {
			return
		}
	}
}

// gather adds waiting outcomes to batch until it is full or the time c
// gives it is up. It reports false when s.commits was closed.
func (s *Scheduler) gather(batch *[]finished, timer *time.Timer, c groupClock) (open bool) {
	end := c.by((*batch)[0])
	timer.Reset(time.Until(end))
	defer timer.Stop()
	for len(*batch) < s.cfg.CommitBatch {
		select {
		case f, ok := <-s.commits:
			if !ok {
				return false
			}
			*batch = append(*batch, f)
			if by := c.by(f); by.Before(end) {
				end = by
				timer.Reset(time.Until(end))
			}
		case <-timer.C:
			return true
		}
	}
	return true
}

// groupClock decides when a group of outcomes is written: CommitWait after
// its first, unless an outcome in it needs the write sooner (by), and
// never before SoonCommitWait. Outcomes that end their tasks, and retries due
// later, wait the longest: nothing waits for their record but the task's
// status, and every outcome a group shares saves the store a write
// (retryd bench, single creates, three interleaved rounds with CommitWait
// 250 µs and 5 ms: SQLite 7,158–7,624 → 7,610–8,436 tasks/s, PostgreSQL
// 3,829–4,541 → 5,246–5,495).
type groupClock struct {
	end   time.Time     // CommitWait after the group's start
	short time.Time     // SoonCommitWait after it, or end if sooner
	soon  time.Time     // a retry due before this needs the write at short
	room  time.Duration // how long before its lease ends an outcome must be written
}

// newGroupClock is the clock of a group started at start, with the
// scheduler's look-ahead ahead and its last write's duration wrote.
//
// A retry must be back in the heap in time to be claimed ahead and sent on
// time: one due before the claim loop would look for it once the wait and
// a write are over (end + wrote + ahead) is written at short.
//
// An outcome must be written before the claim loop reclaims its task: the
// heap holds an IN_FLIGHT task at its lease's end, which the loop claims up
// to ahead before, as the store allows once the lease is over; a watch of
// another instance may also take it when it is over. So an outcome is
// written by its lease's end less the look-ahead (at least half the
// lease's margin) and a write.
func newGroupClock(start time.Time, wait, ahead, wrote time.Duration) groupClock {
	end := start.Add(wait)
	return groupClock{
		end:   end,
		short: start.Add(min(SoonCommitWait, wait)),
		soon:  end.Add(wrote + ahead),
		room:  max(ahead, leaseMargin/2) + wrote,
	}
}

// by returns when b needs its group written at the latest: end, short for
// a retry due soon, or its lease's end less room; never before short.
func (c groupClock) by(b finished) time.Time {
	by := c.end
	if b.f.Status == store.Pending && pendingAt(b.f).Before(c.soon) {
		by = c.short
	}
	if lease := b.task.LeaseUntil.Add(-c.room); lease.Before(by) {
		by = lease
	}
	if by.Before(c.short) {
		by = c.short
	}
	return by
}

// record writes one group, using fs's room for the store's items, and
// brings the heap and the metrics in step with what the store accepted.
func (s *Scheduler) record(ctx context.Context, batch []finished, fs []store.Finish) {
	fs = fs[:0]
	for i := range batch {
		fs = append(fs, batch[i].f)
	}
	var errs []error
	began := time.Now()
	err := s.storeCall(ctx, "TaskFinish", func(ctx context.Context) (err error) {
		errs, err = s.st.TaskFinish(ctx, fs)
		return err
	})
	if err == nil && len(errs) != len(fs) {
		err = fmt.Errorf("store answered %d results for %d outcomes", len(errs), len(fs))
	}
	if s.tracer != nil {
		s.finishSpan(batch, began, time.Now(), err)
	}
	if err != nil {
		s.log.Error("scheduler: outcomes not recorded; their tasks will be retried when their leases expire",
			"tasks", len(batch), "error", err)
		return
	}
	s.mu.Lock()
	for i, b := range batch {
		if errs[i] != nil {
			continue
		}
		version := b.f.Version + 1 // TaskFinish's
		if b.f.Status == store.Pending {
			at := pendingAt(b.f)
			if s.heap.set(store.Due{ID: b.f.TaskID, At: at, Version: version}) {
				signal(s.wakeC)
			}
			if at.Sub(b.f.Now) <= keptRequestHorizon {
				s.heap.keep(b.f.TaskID, b.task)
			}
		} else {
			s.heap.remove(b.f.TaskID, version)
		}
	}
	s.mu.Unlock()
	for i, b := range batch {
		s.observe(ctx, b, errs[i])
	}
}

// pendingAt is when a PENDING finish makes its task due (zero means now, as
// the store reads it).
func pendingAt(f store.Finish) time.Time {
	if f.NextAttemptAt.IsZero() {
		return f.Now
	}
	return f.NextAttemptAt
}

// observe tells the recorder, the observer and the debug log about one
// outcome the store answered err to.
func (s *Scheduler) observe(ctx context.Context, b finished, err error) {
	switch {
	case b.forgone && (errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseLost)):
		return // the create failed before the task was ours: nothing to hand back
	case errors.Is(err, store.ErrLeaseLost):
		// Fencing at work: our lease ran out and another worker took the
		// task over; its outcome, not ours, counts.
		s.log.Warn("scheduler: lease lost; outcome dropped", "task", b.f.TaskID, "attempt", b.task.AttemptNumber)
		s.rec.LeaseLost(b.task.Tenant, b.task.PolicyID)
		return
	case err != nil:
		s.log.Error("scheduler: outcome refused by the store", "task", b.f.TaskID, "error", err)
		return
	}
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	switch {
	case b.f.Attempt.AttemptNumber == 0:
		// A finish without an attempt (the policy forbade it, or was
		// unusable) is no attempt's end: it has no event.
		if debug {
			s.log.LogAttrs(ctx, slog.LevelDebug, "scheduler: task finished without an attempt",
				slog.String("task", b.f.TaskID), slog.String("status", string(b.f.Status)),
				slog.String("error", b.f.LastError))
		}
	case s.obs != nil || debug:
		e := event(b)
		switch {
		case s.tobs != nil:
			s.tobs.ObserveTenant(ctx, b.task.Tenant, e)
		case s.obs != nil:
			s.obs.Observe(ctx, e)
		}
		if debug {
			retry.Log(s.log.With(slog.String("task", b.f.TaskID))).Observe(ctx, e)
		}
	}
	if b.f.Status.Terminal() {
		s.rec.Terminal(b.f.Status, b.f.Now.Sub(b.task.CreatedAt))
	}
}

// event is the end of b's attempt in retry's terms: SUCCEEDED is Succeeded,
// PENDING Retrying, EXHAUSTED and FAILED GaveUp for the decision step's
// reason. Elapsed counts from the start of the task's budget (its creation
// or last redrive).
func event(b finished) retry.Event {
	a := &b.f.Attempt
	e := retry.Event{
		Name:        b.task.PolicyID,
		Attempt:     a.AttemptNumber,
		MaxAttempts: b.maxAttempts,
		Duration:    a.Duration,
		Elapsed:     max(b.f.Now.Sub(b.task.BudgetStart), 0),
	}
	switch b.f.Status {
	case store.Succeeded:
		e.Outcome = retry.Succeeded
		return e
	case store.Pending:
		e.Outcome = retry.Retrying
		e.Delay = max(pendingAt(b.f).Sub(b.f.Now), 0)
	default:
		e.Outcome, e.Reason = retry.GaveUp, b.stop
		if e.Reason == nil { // not from the decision step; not expected after an attempt
			e.Reason = retry.ErrNotRetryable
			if b.f.Status == store.Exhausted {
				e.Reason = retry.ErrAttemptsExhausted
			}
		}
	}
	fail := attemptError{msg: a.ErrorMessage, cause: b.cause}
	if a.ResponseStatus > 0 {
		e.Err = &httpError{fail, a.ResponseStatus}
	} else {
		e.Err = &fail
	}
	return e
}

// attemptError is a failed attempt as its event tells it: the message the
// attempt log keeps, over the transport's error when no response came.
type attemptError struct {
	msg   string
	cause error
}

func (e *attemptError) Error() string { return e.msg }
func (e *attemptError) Unwrap() error { return e.cause }

// httpError is a failed attempt the target answered; retry.StatusCode
// reads its status.
type httpError struct {
	attemptError
	status int
}

func (e *httpError) HTTPStatusCode() int { return e.status }
