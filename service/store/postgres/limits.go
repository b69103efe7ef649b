package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/store"
)

// Destination limits (store.Limits) live in two unlogged tables, a row of
// rate state per key and a row per slot in flight, and each call is one
// statement: a function of migration 007, whose comments say how calls on
// one key take turns.

// Reasons the acquire function gives for a refusal.
const (
	refusedRate     = 1
	refusedInFlight = 2
)

// LimitAcquire asks for room for one attempt under p; see store.Limits and
// package limits.
func (s *Store) LimitAcquire(ctx context.Context, p store.LimitParams) (store.LimitGrant, error) {
	if s.closed.Load() {
		return store.LimitGrant{}, store.ErrClosed
	}
	pl, err := limits.NewPlan(p)
	if err == nil && !textOK(p.Key) {
		err = fmt.Errorf("malformed key: %w", store.ErrInvalid)
	}
	if err != nil {
		return store.LimitGrant{}, fmt.Errorf("postgres: %w", err)
	}
	if pl.Interval == 0 && pl.MaxInFlight == 0 {
		return pl.Granted(pl.Now, ""), nil // no limit: nothing to ask the server
	}
	slot := pl.NewSlot()
	var (
		ok     bool
		at     time.Time
		reason int16
	)
	err = s.pool.QueryRow(ctx, `SELECT o_ok, o_at, o_reason FROM retry_limit_acquire($1, $2, $3, $4, $5, $6, $7, $8)`,
		pl.Key, pl.Time(pl.Now), pl.Interval, pl.Tau, pl.MaxWait, pl.MaxInFlight, pl.Hold, slot).Scan(&ok, &at, &reason)
	switch {
	case err != nil:
		return store.LimitGrant{}, s.fail("limit acquire", err)
	case ok:
		return pl.Granted(at.UnixMicro(), slot), nil
	case reason == refusedRate:
		return pl.RefusedRate(at.UnixMicro()), nil
	case reason == refusedInFlight:
		return pl.RefusedInFlight(), nil
	}
	return store.LimitGrant{}, fmt.Errorf("postgres: limit acquire: refused for reason %d", reason)
}

// LimitRelease frees a slot; see store.Limits.
func (s *Store) LimitRelease(ctx context.Context, key, slot string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if slot == "" || !textOK(key, slot) {
		return nil // no such slot can be held
	}
	if _, err := s.pool.Exec(ctx, `SELECT retry_limit_release($1, $2)`, key, slot); err != nil {
		return s.fail("limit release", err)
	}
	return nil
}

var _ store.Limits = (*Store)(nil)
