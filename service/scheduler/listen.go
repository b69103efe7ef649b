package scheduler

import "context"

// Resync files every PENDING and IN_FLIGHT task the store holds in the
// scheduler's heap, as the periodic resync (Config.Resync) does, and wakes
// the claim loop. Call it when the scheduler may have missed news of tasks
// written by others: a store's change feed (such as postgres.Store.Listen)
// reports nothing while it reconnects, so its owner resyncs each time the
// feed is back.
//
// It is safe to call from any goroutine, before, during or after Run, and
// alongside another Resync. It lists the whole store, so it costs a read of
// every live task. Failed store calls are retried with Config.StoreRetry
// until ctx ends; it then returns the last error.
func (s *Scheduler) Resync(ctx context.Context) error { return s.resync(ctx) }
