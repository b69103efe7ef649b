package run

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// followWait bounds how long Serve waits for the change feed before it
// starts the scheduler anyway.
const followWait = 5 * time.Second

// follow runs the store's change feed into sched until ctx ends: each task
// another instance makes due wakes sched, and each time the feed comes back
// after a break sched resyncs from the store, since what happened during
// the break was not reported. It returns once the feed is first in place
// (or after followWait, or when ctx ends), so that the scheduler's start-up
// resync, which the caller starts next, misses nothing either.
func follow(ctx context.Context, f store.Feed, sched *scheduler.Scheduler, log *slog.Logger) {
	first := make(chan struct{})
	var calls atomic.Int64
	var late atomic.Bool // the scheduler started before the feed was in place
	resync := make(chan struct{}, 1)
	onListening := func() {
		if calls.Add(1) == 1 {
			close(first)
			if !late.Load() {
				return
			}
		}
		poke(resync)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-resync:
			}
			if err := sched.Resync(ctx); err != nil {
				if ctx.Err() == nil {
					log.Warn("resync after the store's change feed came back failed", "error", err)
				}
				continue
			}
			log.Info("store change feed back: resynced the scheduler from the store")
		}
	}()
	go func() {
		err := f.Listen(ctx, sched.Wake, onListening)
		if ctx.Err() == nil {
			// Only a closed store ends a feed early; polling still works.
			log.Error("store change feed stopped; tasks other instances create wait for the periodic resync", "error", err)
		}
	}()
	t := time.NewTimer(followWait)
	defer t.Stop()
	select {
	case <-first:
	case <-ctx.Done():
	case <-t.C:
		// A feed that comes in place before the scheduler's start-up
		// resync needs no resync of its own; one that comes later does.
		late.Store(true)
		log.Warn("store change feed not in place yet; starting the scheduler without it")
	}
}

// poke sends on a one-slot channel without blocking: one pending signal
// is as good as many.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
