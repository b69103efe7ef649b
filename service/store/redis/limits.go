package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"

	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/store"
)

// Destination limits (store.Limits) keep, per key, a hash of its rate
// state (tat and ticket, µs) and a sorted set of its slots scored by
// expiry (µs). Both share a hash tag of their own, made from the key, so
// that one script reads and writes them in one Redis Cluster slot, and
// keys spread over the cluster. Each expires a while (limits.Idle) after
// the last moment its state matters, so idle keys leave nothing behind.

// limitKeys returns the rate hash and the slots set of key.
func (k keys) limitKeys(key string) (rate, slots string) {
	h := fnv.New64a()
	h.Write([]byte(key))
	base := k.prefix + "{l:" + hex.EncodeToString(h.Sum(nil)) + "}:"
	return base + "rate:" + key, base + "slots:" + key
}

// LimitAcquire asks for room for one attempt under p; see store.Limits and
// package limits.
func (s *Store) LimitAcquire(ctx context.Context, p store.LimitParams) (store.LimitGrant, error) {
	if err := s.open("limit acquire"); err != nil {
		return store.LimitGrant{}, err
	}
	pl, err := limits.NewPlan(p)
	if err != nil {
		return store.LimitGrant{}, fmt.Errorf("redis: %w", err)
	}
	if pl.Interval == 0 && pl.MaxInFlight == 0 {
		return pl.Granted(pl.Now, ""), nil // no limit: nothing to ask the server
	}
	slot := pl.NewSlot()
	rate, slots := s.k.limitKeys(pl.Key)
	res, err := s.sc.limit.Run(ctx, s.rdb, []string{rate, slots}, pl.Now, pl.Interval, pl.Tau, pl.MaxWait,
		pl.MaxInFlight, pl.Hold, slot, limits.Idle.Milliseconds()).Int64Slice()
	switch {
	case err != nil:
		return store.LimitGrant{}, s.fail("limit acquire", err)
	case len(res) == 2 && res[0] == 1:
		return pl.Granted(res[1], slot), nil
	case len(res) == 3 && res[1] == 1:
		return pl.RefusedRate(res[2]), nil
	case len(res) == 2 && res[1] == 2:
		return pl.RefusedInFlight(), nil
	}
	return store.LimitGrant{}, fmt.Errorf("redis: limit acquire: reply %v: %w", res, errCorrupt)
}

// LimitRelease frees a slot; see store.Limits.
func (s *Store) LimitRelease(ctx context.Context, key, slot string) error {
	if err := s.open("limit release"); err != nil {
		return err
	}
	if slot == "" {
		return nil // no such slot can be held
	}
	_, slots := s.k.limitKeys(key)
	return s.fail("limit release", s.rdb.ZRem(ctx, slots, slot).Err())
}

var _ store.Limits = (*Store)(nil)
