// Package prep checks the arguments of the stores' methods and fills in
// their defaults, as store.Store says, before each store does its own
// work: what the stores did alike, each in its own copy.
package prep

import (
	"bytes"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Policy returns the policy PolicyPut stores for in: a copy, its Spec
// never nil, its CreatedAt the current time when zero, cut to the
// millisecond, in UTC. A policy without a tenant or an ID is ErrInvalid.
func Policy(in *store.Policy) (*store.Policy, error) {
	if in.Tenant == "" || in.ID == "" {
		return nil, fmt.Errorf("empty tenant or id: %w", store.ErrInvalid)
	}
	p := &store.Policy{Tenant: in.Tenant, ID: in.ID, Spec: bytes.Clone(in.Spec), CreatedAt: in.CreatedAt}
	if p.Spec == nil {
		p.Spec = []byte{}
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	p.CreatedAt = time.UnixMilli(p.CreatedAt.UnixMilli()).UTC()
	return p, nil
}

// Finish refuses, with ErrInvalid, an f whose Status is not one a
// TaskFinish sets: SUCCEEDED, PENDING (a retry), EXHAUSTED or FAILED, and
// a Held f that is not PENDING or logs an attempt.
func Finish(f *store.Finish) error {
	if f.Held && (f.Status != store.Pending || f.Attempt.AttemptNumber != 0) {
		return fmt.Errorf("held finish as %q with attempt %d: %w", f.Status, f.Attempt.AttemptNumber, store.ErrInvalid)
	}
	switch f.Status {
	case store.Succeeded, store.Pending, store.Exhausted, store.Failed:
		return nil
	}
	return fmt.Errorf("finish as %q: %w", f.Status, store.ErrInvalid)
}

// FinishTimes returns when f happened, its Now or the current time when
// zero, and when its task is next due if f is a retry: its NextAttemptAt,
// or now when zero.
func FinishTimes(f *store.Finish) (now, next time.Time) {
	now = f.Now
	if now.IsZero() {
		now = time.Now()
	}
	next = f.NextAttemptAt
	if next.IsZero() {
		next = now
	}
	return now, next
}

// Transition refuses, with ErrInvalid, a tr that is neither a cancel (To
// CANCELLED) nor a redrive (To PENDING), and returns when it happens: its
// Now, or the current time when zero.
func Transition(tr *store.Transition) (now time.Time, err error) {
	if tr.To != store.Cancelled && tr.To != store.Pending {
		return time.Time{}, fmt.Errorf("transition to %q: %w", tr.To, store.ErrInvalid)
	}
	if now = tr.Now; now.IsZero() {
		now = time.Now()
	}
	return now, nil
}
