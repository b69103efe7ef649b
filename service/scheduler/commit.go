package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
)

// commitLoop records outcomes in groups: it takes the first waiting outcome,
// gathers more for up to CommitWait (or until CommitBatch), and writes them
// in one durable TaskFinish. While one group is being written the next one
// gathers, so the store's fsyncs are shared by many attempts. It returns
// once s.commits is closed and drained.
func (s *Scheduler) commitLoop(ctx context.Context) {
	batch := make([]finished, 0, s.cfg.CommitBatch)
	fs := make([]store.Finish, 0, s.cfg.CommitBatch) // reused: the store keeps none of it once TaskFinish returns
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-s.commits
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		open := s.gather(&batch, timer)
		s.record(ctx, batch, fs)
		if !open {
			return
		}
	}
}

// gather adds waiting outcomes to batch until it is full or CommitWait has
// passed. It reports false when s.commits was closed.
func (s *Scheduler) gather(batch *[]finished, timer *time.Timer) (open bool) {
	timer.Reset(s.cfg.CommitWait)
	defer timer.Stop()
	for len(*batch) < s.cfg.CommitBatch {
		select {
		case f, ok := <-s.commits:
			if !ok {
				return false
			}
			*batch = append(*batch, f)
		case <-timer.C:
			return true
		}
	}
	return true
}

// record writes one group, using fs's room for the store's items, and
// brings the heap and the metrics in step with what the store accepted.
func (s *Scheduler) record(ctx context.Context, batch []finished, fs []store.Finish) {
	fs = fs[:0]
	for i := range batch {
		fs = append(fs, batch[i].f)
	}
	var errs []error
	err := s.storeCall(ctx, "TaskFinish", func(ctx context.Context) (err error) {
		errs, err = s.st.TaskFinish(ctx, fs)
		return err
	})
	if err == nil && len(errs) != len(fs) {
		err = fmt.Errorf("store answered %d results for %d outcomes", len(errs), len(fs))
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
		s.observe(b, errs[i])
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

func (s *Scheduler) observe(b finished, err error) {
	policy := b.task.PolicyID
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		// Fencing at work: our lease ran out and another worker took the
		// task over; its outcome, not ours, counts.
		s.log.Warn("scheduler: lease lost; outcome dropped", "task", b.f.TaskID, "attempt", b.task.AttemptNumber)
		s.rec.Attempt(metrics.OutcomeLeaseLost, policy)
		return
	case err != nil:
		s.log.Error("scheduler: outcome refused by the store", "task", b.f.TaskID, "error", err)
		return
	}
	if b.f.Attempt.AttemptNumber > 0 {
		s.rec.Attempt(outcomeLabel(b.f.Status), policy)
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.LogAttrs(context.Background(), slog.LevelDebug, "attempt recorded",
			slog.String("task", b.f.TaskID), slog.Int("attempt", b.task.AttemptNumber),
			slog.String("status", string(b.f.Status)), slog.Int("response_status", b.f.LastStatus),
			slog.String("error", b.f.Attempt.ErrorMessage))
	}
	if b.f.Status.Terminal() {
		s.rec.Terminal(b.f.Status, b.f.Now.Sub(b.task.CreatedAt))
	}
}

func outcomeLabel(st store.Status) string {
	switch st {
	case store.Succeeded:
		return metrics.OutcomeSucceeded
	case store.Exhausted:
		return metrics.OutcomeExhausted
	case store.Failed:
		return metrics.OutcomeFailed
	}
	return metrics.OutcomeRetry
}
