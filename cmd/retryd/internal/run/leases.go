package run

import (
	"context"
	"log/slog"
	"time"

	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// minLeaseWatch bounds how often watchLeases lists the store.
const minLeaseWatch = 500 * time.Millisecond

// watchLeases files every IN_FLIGHT task of a shared store in sched at the
// moment its lease expires, every lease/2, until ctx ends.
//
// A scheduler learns of another instance's tasks through the change feed,
// and when it asks for one that the other instance has claimed, the store
// refuses and tells it when the lease ends (ClaimParams.Later), so that
// the task is claimed again as soon as it expires. This watch is the
// second line for a task no hint reached this instance about at all:
// listing the IN_FLIGHT tasks (at most every instance's workers, when all
// is well) twice per lease means that each lease is seen while it runs. A
// lease that is still held then costs a refused ID, nothing more.
// Instances sharing a store should use one --lease, so that the interval
// suits every lease.
func watchLeases(ctx context.Context, st store.Store, sched *scheduler.Scheduler, lease time.Duration, log *slog.Logger) {
	t := time.NewTicker(max(lease/2, minLeaseWatch))
	defer t.Stop()
	filter := store.TaskFilter{Statuses: []store.Status{store.InFlight}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		page := store.Page{Limit: store.MaxPageLimit}
		for {
			items, next, err := st.TaskList(ctx, filter, page)
			if err != nil {
				if ctx.Err() == nil {
					// The next tick tries again; the scheduler's own
					// store calls report the outage in more detail.
					log.Debug("listing leased tasks failed", "error", err)
				}
				break
			}
			for _, task := range items {
				sched.Wake(task.Due())
			}
			if next == "" {
				break
			}
			page.Token = next
		}
	}
}
