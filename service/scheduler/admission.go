package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/store"
)

// HeldRecorder is a Recorder that is told of the tasks admission held
// back (see Config.HostLimits); *metrics.Metrics is one. Held is called
// from many goroutines at once.
type HeldRecorder interface {
	// Held counts a task held back from host (hostlimit.Key), by its
	// limiter's rate or, when circuitOpen, by its open circuit.
	Held(host string, circuitOpen bool)
}

// admit passes claimed task t through its target host's limiter, unless
// the policy's setting or the configuration turns admission off. Admitted,
// it waits for its slot and returns the host to report the attempt's
// outcome to (nil without admission). Held back, it queues t's hand-back,
// PENDING and uncharged, and reports held.
func (s *Scheduler) admit(ctx context.Context, t *store.Task, set hostlimit.Setting, target string) (h *hostlimit.Host, held bool) {
	if s.cfg.HostLimits == nil || !s.cfg.HostLimits.On(set) {
		return nil, false // before Key, which reads the URL: most policies are off
	}
	if h = s.cfg.HostLimits.Get(hostlimit.Key(target), set); h == nil {
		return nil, false
	}
	now := time.Now()
	wait, until, err := h.Admit(now)
	if err != nil {
		if s.held != nil {
			s.held.Held(h.Name, errors.Is(err, retry.ErrCircuitOpen))
		}
		s.queue(t, holdBack(t, until, now, hostlimit.HeldReason))
		return nil, true
	}
	if wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
		}
	}
	return h, false
}

// holdBack hands t back unsent, due at until: PENDING, its attempt not
// charged (store.Finish.Held), its lastError saying why it waits.
func holdBack(t *store.Task, until, now time.Time, why string) store.Finish {
	return store.Finish{
		TaskID:        t.ID,
		Version:       t.Version,
		Status:        store.Pending,
		Held:          true,
		NextAttemptAt: store.CeilMillis(until),
		PrevDelay:     t.PrevDelay,
		LastError:     store.HeldError(t.LastError, why),
		LastStatus:    t.LastStatus,
		Now:           now,
	}
}

// report tells h how the attempt it admitted ended: a success, an answer
// (which the limiter classifies by its status: 429 and 503 are overload),
// or the transport's error (a refused or reset connection and a timeout
// are). An attempt cut short by shutdown says nothing of the target.
func (s *Scheduler) report(ctx context.Context, h *hostlimit.Host, p *retry.Policy, res *dispatch.Result) {
	if h == nil || (ctx.Err() != nil && errors.Is(res.Err, context.Canceled)) {
		return
	}
	var err error
	switch {
	case res.Outcome(p) == dispatch.Success:
	case res.Status > 0:
		err = answer{res}
	default:
		err = res.Err
	}
	h.Report(time.Now(), err)
}
