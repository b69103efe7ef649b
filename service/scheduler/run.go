package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Run rebuilds the heap from the store and runs due tasks until ctx ends,
// claiming from the heap while the rebuild still fills it. Then it stops
// claiming, gives attempts in flight ShutdownGrace to finish, cuts short
// and releases those that do not, records every outcome, and returns nil.
// It returns an error only if Run was already called or if the heap cannot
// be rebuilt (the store is retried until ctx ends; ctx ending first is a
// shutdown, not an error): then it stops as it would at shutdown.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run called twice")
	}
	// The claim loop does not wait for the rebuild: a store of a million
	// tasks takes seconds to list (PostgreSQL some 9 s), and a task due
	// meanwhile must not wait for the end of the walk. A task claimed
	// before the walk files it again is a stale entry, as a periodic
	// resync can leave: the store refuses it at claim time.
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	var rebuildErr error
	rebuilt := make(chan struct{})
	go func() {
		defer close(rebuilt)
		began := time.Now()
		if err := s.resync(loopCtx); err != nil {
			if loopCtx.Err() == nil {
				rebuildErr = err
				stopLoop()
			}
			return
		}
		s.log.Info("scheduler heap rebuilt", "tasks", s.Pending(), "took", time.Since(began).String())
	}()
	s.log.Info("scheduler started", "workers", s.cfg.Workers, "lease", s.cfg.Lease.String())

	// Attempts and commits outlive ctx: attempts until the grace ends,
	// commits until the last outcome is recorded.
	attemptCtx, cutShort := context.WithCancel(context.WithoutCancel(ctx))
	defer cutShort()
	commitCtx, stopCommits := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCommits()
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		s.commitLoop(commitCtx)
	}()
	go s.resyncLoop(loopCtx)
	// Attempts run on a pool of long-lived goroutines: a goroutine per
	// attempt would grow a new stack through net/http every time.
	var pool sync.WaitGroup
	for range s.cfg.Workers {
		pool.Go(func() {
			for t := range s.work {
				s.attempt(attemptCtx, t)
			}
		})
	}
	defer pool.Wait()

	s.mu.Lock()
	s.handoffOpen = true
	s.mu.Unlock()
	s.claimLoop(loopCtx)

	s.closeHandoff()
	s.claims.Wait() // the last claims and hand-offs may still start attempts
	close(s.work)
	s.log.Info("scheduler stopping", "in_flight", s.busy.Load(), "grace", s.cfg.ShutdownGrace.String())
	if !waitTimeout(s.workers.Wait, s.cfg.ShutdownGrace) {
		s.log.Warn("scheduler: grace period over; releasing the attempts still in flight", "in_flight", s.busy.Load())
		cutShort()
		// Workers left now wait for the committer, which waits for the
		// store: if it does not answer within another grace period,
		// give up on recording.
		if !waitTimeout(s.workers.Wait, s.cfg.ShutdownGrace) {
			stopCommits()
			s.workers.Wait()
		}
	}
	close(s.commits)
	if !waitTimeout(func() { <-committed }, s.cfg.ShutdownGrace) {
		stopCommits()
		<-committed
	}
	if commitCtx.Err() != nil {
		// Unrecorded tasks keep their leases, which expire, and are
		// claimed again (their attempts counted as lost).
		s.log.Error("scheduler: the store did not record the last outcomes; their tasks will be reclaimed when their leases expire")
	}
	<-rebuilt
	if rebuildErr != nil {
		s.log.Error("scheduler stopped: the heap could not be rebuilt", "error", rebuildErr)
		return fmt.Errorf("scheduler: rebuild the heap: %w", rebuildErr)
	}
	s.log.Info("scheduler stopped")
	return nil
}

// claimLoop claims due tasks whenever a worker is free, sleeping until the
// earliest due time, a Wake or a free worker otherwise. It looks ahead
// (see lookahead), so that the durable claim is done by the time the task
// is due, and keeps up to maxClaims claims in flight.
func (s *Scheduler) claimLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for ctx.Err() == nil {
		free := s.cfg.Workers - int(s.busy.Load())
		// The store compares whole milliseconds; asking with a finer Now
		// would take entries from the heap that it would not hand out yet.
		now := time.Now()
		ahead := s.ahead.get(now)
		horizon := now.Add(ahead).Truncate(time.Millisecond)
		var ids []dueTask
		canClaim := free > 0 && s.claiming.Load() < maxClaims
		s.mu.Lock()
		if canClaim {
			// Free again under the lock: Reserve may have taken workers.
			free = s.cfg.Workers - int(s.busy.Load())
			ids = s.heap.popDue(horizon, min(free, s.cfg.ClaimBatch), nil)
			// Reserve the workers now, so that the next round (or
			// Reserve) does not hand them out again while this claim is
			// in flight.
			s.busy.Add(int64(len(ids)))
		}
		next, ok := s.heap.next()
		s.mu.Unlock()
		if len(ids) > 0 {
			s.claiming.Add(1)
			s.claims.Add(1)
			go s.claim(ctx, horizon, ids)
			continue
		}
		// Without a free worker or claim slot, only their release (freeC)
		// can change anything.
		var fire <-chan time.Time
		if ok && canClaim {
			timer.Reset(next.Add(-ahead).Sub(now))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-s.wakeC:
		case <-s.freeC:
		case <-fire:
		}
		timer.Stop()
	}
}

// maxClaims is how many claims may be in flight at once. One: while it
// commits, the tasks that come due gather for the next, so that tasks
// created one at a time through the API are claimed many to a commit
// rather than one or two (retryd bench, single creates from 8 clients, two
// interleaved runs: SQLite 6,850–7,470 tasks/s against 6,000–6,080 with
// two in flight, PostgreSQL 3,160–3,170 against 2,420–2,560, Redis
// 6,150–6,290 against 5,960; the loop's attempts/s within noise).
const maxClaims = 1

// claim leases the tasks ids the store agrees are due at now and starts an
// attempt for each. Those it does not hand out but still holds live (due
// later, or leased by another worker) are filed again at the time the store
// gives; the others were cancelled or finished, and leave the heap.
func (s *Scheduler) claim(ctx context.Context, now time.Time, due []dueTask) {
	defer func() {
		s.claiming.Add(-1)
		s.claims.Done()
		signal(s.freeC)
	}()
	ids := make([]string, len(due))
	// When the heap kept every request, the store need not read them.
	kept := make(map[string]*store.Task, len(due))
	for i, d := range due {
		ids[i] = d.id
		if d.req != nil {
			kept[d.id] = d.req
		}
	}
	omit := len(kept) == len(due)
	var tasks []*store.Task
	began := time.Now()
	err := s.storeCall(ctx, "TaskClaim", func(ctx context.Context) (err error) {
		tasks, err = s.st.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: s.cfg.Lease, Limit: len(ids), IDs: ids,
			OmitRequest: omit, Later: s.file})
		return err
	})
	ended := time.Now()
	s.ahead.observe(ended, ended.Sub(began))
	s.busy.Add(-int64(len(ids) - len(tasks)))
	if err != nil {
		// Only shutdown or a broken store gets here: keep the IDs for the
		// next run of the loop (or the next start).
		s.log.Warn("scheduler: claim failed", "error", err, "tasks", len(ids))
		s.mu.Lock()
		for _, d := range due {
			s.heap.set(store.Due{ID: d.id, At: now, Version: d.version})
			if d.req != nil {
				s.heap.keep(d.id, d.req)
			}
		}
		s.mu.Unlock()
		return
	}
	if omit {
		for _, t := range tasks {
			if t.TargetURL == "" {
				withRequest(t, kept[t.ID])
			}
		}
	}
	s.startLeased(tasks)
	if s.tracer != nil && len(tasks) > 0 {
		s.storeSpan("store.TaskClaim", began, ended, len(tasks), nil)
	}
}

// startLeased starts the attempts of tasks the store leased to this
// instance, on workers already taken for them (a claim's or Reserve's):
// each is filed in the heap at its lease's end first, so that one whose
// outcome is never recorded is claimed again then.
func (s *Scheduler) startLeased(tasks []*store.Task) {
	s.mu.Lock()
	for _, t := range tasks {
		s.heap.set(store.Due{ID: t.ID, At: t.LeaseUntil, Version: t.Version})
	}
	s.mu.Unlock()
	for _, t := range tasks {
		s.workers.Add(1)
		s.work <- t // never waits: it holds as many tasks as there are workers
	}
}

// withRequest gives t the request of k, the same task as an earlier claim
// returned it: every field ClaimParams.OmitRequest leaves zero.
func withRequest(t, k *store.Task) {
	t.TargetURL, t.Method, t.Headers, t.Body, t.BodyBinary = k.TargetURL, k.Method, k.Headers, k.Body, k.BodyBinary
	t.BodyRef, t.BodySize = k.BodyRef, k.BodySize
}

// waitTimeout runs wait up to d and reports whether it returned.
func waitTimeout(wait func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
