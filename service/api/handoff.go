package api

import (
	"context"
	"errors"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Handoff is a scheduler that takes tasks created claimed (see
// store.Task.ClaimAtCreate) straight to its workers, so that their first
// attempt needs no claim of its own; *scheduler.Scheduler is one.
type Handoff interface {
	// Reserve takes up to n workers and says the lease to create with,
	// counted from now.
	Reserve(n int) (lease time.Duration, got int)
	// Start runs a task the store created claimed, on a reserved worker.
	Start(t *store.Task)
	// Release gives back n reserved workers.
	Release(n int)
	// Forgo gives back the workers reserved for tasks whose create failed
	// with its outcome unknown, handing back unsent any the store holds.
	Forgo(ts []*store.Task)
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
		if t.DueAtCreate() {
			due++
		}
	}
	if due == 0 {
		return 0
	}
	lease, got := s.handoff.Reserve(due)
	// The lease runs from now, as a claim's from its horizon: reading the
	// request (a large body, the blob store) may have taken a while since
	// CreatedAt.
	until, left := s.now().Add(lease), got
	for _, t := range ts {
		if left > 0 && t.DueAtCreate() {
			t.LeaseUntil = until
			left--
		}
	}
	return got
}

// createCtx is ctx for a create that holds reserved workers: not cancelled
// with the request, so that whether the store created the tasks claimed is
// known (a create cut short may still have committed).
func createCtx(ctx context.Context, reserved int) context.Context {
	if reserved > 0 {
		return context.WithoutCancel(ctx)
	}
	return ctx
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

// settle gives back the reserved workers no task took, once the store has
// answered err to the create of ts: all of them after a refusal or a
// success; after a failure whose outcome is unknown, those of the tasks
// asked to be created claimed, through Forgo.
func (s *server) settle(reserved int, err error, ts []*store.Task) {
	if reserved == 0 {
		return
	}
	if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid) {
		s.handoff.Release(reserved)
		return
	}
	var asked []*store.Task
	for _, t := range ts {
		if !t.LeaseUntil.IsZero() {
			asked = append(asked, t)
		}
	}
	s.handoff.Forgo(asked)
}
