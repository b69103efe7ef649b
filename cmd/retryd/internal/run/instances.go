package run

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// How an instance of a shared store shows it is alive, and how soon the
// others take its leases back once it stops (store.Instances): a beat
// every half second, dead after 2.5 s without one, looked for four times
// a second. A task caught in flight by a kill is then due again some 2–3
// seconds later, where the lease (a minute by default) would have made it
// wait for all of it (scripts/chaos.sh: p99 3.5 s on PostgreSQL, 3.0 s on
// Redis; with a beat a second and 3 s, 6 s on PostgreSQL). A live instance that misses five
// beats in a row (a store outage, a stalled process) loses its leases,
// which fencing makes safe: its outcomes are refused and the tasks run
// again.
const (
	beatEvery    = 500 * time.Millisecond
	deadAfter    = 2500 * time.Millisecond
	reclaimEvery = 250 * time.Millisecond
)

// keepInstance joins st's instances, then beats and takes back the leases
// of dead instances (waking sched for the tasks it takes back) until the
// returned stop is called, which leaves, once the scheduler has recorded
// its last outcomes. It runs past ctx's end on purpose: attempts still
// finish during the shutdown grace, and their leases must hold meanwhile.
func keepInstance(ctx context.Context, st store.Instances, sched *scheduler.Scheduler, lease time.Duration, log *slog.Logger) (stop func(), err error) {
	id, err := st.Join(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	log.Info("joined the instances sharing the store", "instance", id, "beat", beatEvery.String(), "dead_after", deadAfter.String())
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { beat(loopCtx, st, lease, log) })
	wg.Go(func() { reclaimDead(loopCtx, st, sched, log) })
	return func() {
		cancel()
		wg.Wait()
		leaveCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer done()
		if err := st.Leave(leaveCtx); err != nil {
			log.Warn("could not leave the instances; the others will take it for dead", "error", err)
		}
	}, nil
}

// beat tells the store the instance is alive every beatEvery.
func beat(ctx context.Context, st store.Instances, lease time.Duration, log *slog.Logger) {
	failing := false
	every(ctx, beatEvery, beatEvery, func(ctx context.Context) {
		err := st.Beat(ctx, time.Now(), lease)
		switch {
		case err == nil:
			if failing {
				log.Info("heartbeat back")
			}
			failing = false
		case errors.Is(err, store.ErrLeaseLost):
			log.Warn("this instance was taken for dead; its attempts in flight will not be recorded, and their tasks run again", "error", err)
		case ctx.Err() == nil && !failing:
			// Told once per outage: the scheduler's own store calls
			// report it in more detail.
			log.Warn("heartbeat failed; after "+deadAfter.String()+" without one, other instances take this one's leases", "error", err)
			failing = true
		}
	})
}

// reclaimDead takes back the leases of dead instances every reclaimEvery
// and files the tasks in sched (the store tells the other instances too).
func reclaimDead(ctx context.Context, st store.Instances, sched *scheduler.Scheduler, log *slog.Logger) {
	every(ctx, reclaimEvery, reclaimEvery, func(ctx context.Context) {
		due, err := st.ReclaimDead(ctx, time.Now(), deadAfter)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("taking back dead instances' leases failed", "error", err)
			}
			return
		}
		if len(due) > 0 {
			log.Info("took back the leases of an instance that stopped beating", "tasks", len(due))
		}
		for _, d := range due {
			sched.Wake(d)
		}
	})
}
