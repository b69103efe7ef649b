package api

import (
	"time"

	"github.com/retrykit/retry/service/store"
)

// Handoff is a scheduler that takes tasks created claimed (see
// store.Task.ClaimAtCreate) straight to its workers, so that their first
// attempt needs no claim of its own; *scheduler.Scheduler is one.
type Handoff interface {
	// Reserve takes up to n workers and says the lease to create with.
	Reserve(n int) (lease time.Duration, got int)
	// Start runs a task the store created claimed, on a reserved worker.
	Start(t *store.Task)
	// Release gives back n reserved workers.
	Release(n int)
}

// claimAtCreate reserves workers for the tasks of ts due at once, in
// order, and sets the LeaseUntil of each that got one, for the store to
// create it claimed. It returns the number reserved, which the caller
// gives back through handOver and Release.
func (s *server) claimAtCreate(ts []*store.Task) int {
	if s.handoff == nil {
		return 0
	}
	due := 0
	for _, t := range ts {
		if !t.NextAttemptAt.After(t.CreatedAt) {
			due++
		}
	}
	if due == 0 {
		return 0
	}
	lease, got := s.handoff.Reserve(due)
	left := got
	for _, t := range ts {
		if left > 0 && !t.NextAttemptAt.After(t.CreatedAt) {
			t.LeaseUntil = t.CreatedAt.Add(lease)
			left--
		}
	}
	return got
}

// handOver gives the scheduler t, just created: to a reserved worker when
// the store created it claimed, taking one of *reserved, else to its heap.
func (s *server) handOver(t *store.Task, reserved *int) {
	if *reserved > 0 && t.Status == store.InFlight {
		*reserved--
		s.handoff.Start(t)
		return
	}
	s.wake(t)
}

// release gives back the reserved workers no task took.
func (s *server) release(reserved int) {
	if reserved > 0 {
		s.handoff.Release(reserved)
	}
}
