package scheduler

import (
	"time"

	"github.com/retrykit/retry/service/store"
)

// Reserve takes up to n free workers for tasks about to be created claimed,
// and returns how many it took and the lease to create them with, counted
// from now; none when the scheduler is not running or has no worker free.
// Each must be given back by Start, Release or Forgo.
//
// This hand-off lets the API give the scheduler a task it is creating,
// already claimed: the store creates it leased to this instance (see
// store.Task.ClaimAtCreate), and its first attempt starts without a claim
// of its own. On PostgreSQL that claim was a statement and a commit per
// few tasks, a fifth of the work behind each created task (retryd bench,
// single creates, interleaved pairs: 2,715–2,845 → 3,434–3,697 tasks/s);
// on SQLite a pass of the writer (5,059–5,302 → 5,536–5,938); on Redis a
// script call (3,860–4,774 → 5,354–5,838). A hand-off holds a worker from
// Reserve to Start or Release, as a claim in flight does, so Run waits for
// it before closing the workers' queue.
func (s *Scheduler) Reserve(n int) (lease time.Duration, got int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.handoffOpen {
		return 0, 0
	}
	got = min(n, s.cfg.Workers-int(s.busy.Load()))
	if got <= 0 {
		return 0, 0
	}
	s.busy.Add(int64(got))
	s.claims.Add(got)
	return s.cfg.Lease, got
}

// Start runs the first attempt of t, which the store created claimed, on a
// worker Reserve took.
func (s *Scheduler) Start(t *store.Task) {
	s.startLeased([]*store.Task{t})
	s.claims.Done()
}

// Release gives back n workers Reserve took for tasks the store did not
// create claimed (a repeat, a refusal, a store that does not do it).
func (s *Scheduler) Release(n int) {
	if n <= 0 {
		return
	}
	s.busy.Add(-int64(n))
	s.claims.Add(-n)
	signal(s.freeC)
}

// Forgo gives back the workers reserved for ts, tasks asked to be created
// claimed whose create failed with its outcome unknown (the store out of
// reach, a commit whose answer was lost): the store may hold some of them
// claimed, which nobody would run before their leases ran out, and whose
// first attempt would then be charged though never sent. So each is
// handed back unsent, as admission hands back a task it holds (PENDING,
// due at once, its attempt not charged); the store refuses the hand-back
// of a task it does not hold.
func (s *Scheduler) Forgo(ts []*store.Task) {
	now := time.Now()
	for _, t := range ts {
		c := store.CreatedBy(t, "")
		s.commits <- finished{f: unsent(c, "not sent: its create's outcome was unknown", now), task: c, forgone: true}
	}
	s.Release(len(ts))
}

// closeHandoff ends Reserve's hand-outs, so that Run can wait for the last.
func (s *Scheduler) closeHandoff() {
	s.mu.Lock()
	s.handoffOpen = false
	s.mu.Unlock()
}
