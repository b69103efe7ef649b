package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// sendSlack is how far past an attempt's due time MaySend moves the
// horizon, so that the attempts due within it share one write.
const sendSlack = 20 * time.Millisecond

// holder returns the instance claims name, "" for none.
func (s *Store) holder() string {
	s.inst.Lock()
	defer s.inst.Unlock()
	return s.inst.id
}

// Join registers a new instance; see store.Instances.
func (s *Store) Join(ctx context.Context, now time.Time) (string, error) {
	if err := s.open("join"); err != nil {
		return "", err
	}
	id := store.NewID()
	if err := s.rdb.ZAdd(ctx, s.k.beats(), goredis.Z{Score: float64(epochms.Of(now)), Member: id}).Err(); err != nil {
		return "", s.fail("join", err)
	}
	s.inst.Lock()
	s.inst.id, s.inst.sendTo = id, 0
	s.inst.Unlock()
	return id, nil
}

// Beat records that the instance is alive and extends its leases that
// would end within half a lease; see store.Instances.
func (s *Store) Beat(ctx context.Context, now time.Time, lease time.Duration) error {
	if err := s.open("beat"); err != nil {
		return err
	}
	id := s.holder()
	if id == "" {
		return fmt.Errorf("redis: beat: %w: not joined", store.ErrInvalid)
	}
	alive, err := s.sc.instance.Run(ctx, s.rdb, []string{s.k.beats(), s.k.sendTo()}, "beat", id, epochms.Of(now)).Int()
	if err != nil {
		return s.fail("beat", err)
	}
	if alive == 0 {
		s.sendMu.Lock()
		defer s.sendMu.Unlock()
		newID, err := s.joinAgain(ctx, id, now)
		if err != nil {
			return err
		}
		return fmt.Errorf("redis: beat: instance %s was taken for dead and its leases taken back; joined again as %s: %w",
			id, newID, store.ErrLeaseLost)
	}
	calls := make([]*call, 0, len(s.claim))
	for _, p := range s.claim {
		calls = append(calls, &call{sc: s.sc.leases, keys: s.leaseKeys(p),
			args: []any{"extend", id, epochms.Of(now.Add(lease / 2)), epochms.Of(now.Add(lease)), epochms.Of(now.Add(-lease))}})
	}
	s.eval(ctx, calls...)
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil {
			return s.fail("beat", err)
		}
	}
	return nil
}

// leaseKeys are the keys of partition p the leases script reads.
func (s *Store) leaseKeys(p int) []string {
	return []string{s.k.due(p), s.k.lease(p), s.k.counts(p), s.k.tenantCounts(p), s.k.held(p)}
}

// Leave forgets the instance; see store.Instances.
func (s *Store) Leave(ctx context.Context) error {
	s.inst.Lock()
	id := s.inst.id
	s.inst.id, s.inst.sendTo = "", 0
	s.inst.Unlock()
	if id == "" || s.closed.Load() {
		return nil
	}
	pipe := s.rdb.Pipeline()
	pipe.ZRem(ctx, s.k.beats(), id)
	pipe.HDel(ctx, s.k.sendTo(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.fail("leave", err)
	}
	return nil
}

// MaySend raises the instance's send horizon to t's due time; see
// store.SendHorizon.
func (s *Store) MaySend(ctx context.Context, t *store.Task) error {
	if t.Holder == "" {
		return nil // claimed without an instance: leases run out as they always did
	}
	due := epochms.Of(store.CeilMillis(t.NextAttemptAt))
	s.inst.Lock()
	id, sendTo := s.inst.id, s.inst.sendTo
	s.inst.Unlock()
	if id == t.Holder && due <= sendTo {
		return nil // within the horizon: the common case, without waiting for a raise in progress
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.inst.Lock()
	id, sendTo = s.inst.id, s.inst.sendTo
	s.inst.Unlock()
	if id != t.Holder {
		return fmt.Errorf("redis: send: the lease of task %s is instance %s's, taken for dead: %w", t.ID, t.Holder, store.ErrLeaseLost)
	}
	if due <= sendTo {
		return nil
	}
	to := max(due, epochms.Of(time.Now())) + sendSlack.Milliseconds()
	alive, err := s.sc.instance.Run(ctx, s.rdb, []string{s.k.beats(), s.k.sendTo()}, "send", id, to).Int()
	if err != nil {
		return s.fail("send horizon", err)
	}
	if alive == 0 {
		newID, err := s.joinAgain(ctx, id, time.Now())
		if err != nil {
			return fmt.Errorf("redis: send: instance %s was taken for dead (joining again: %v): %w", id, err, store.ErrLeaseLost)
		}
		return fmt.Errorf("redis: send: instance %s was taken for dead; joined again as %s: %w", id, newID, store.ErrLeaseLost)
	}
	s.inst.Lock()
	if s.inst.id == id {
		s.inst.sendTo = to
	}
	s.inst.Unlock()
	return nil
}

// ReclaimDead takes back the leases of dead instances, in every
// partition; see store.Instances. The instances are removed first, so
// that a dead one that comes back cannot raise its horizon; should this
// call fail after that, their leases run out as they would have.
func (s *Store) ReclaimDead(ctx context.Context, now time.Time, after time.Duration) ([]store.Due, error) {
	if err := s.open("reclaim"); err != nil {
		return nil, err
	}
	dead, err := s.sc.bury.Run(ctx, s.rdb, []string{s.k.beats(), s.k.sendTo()}, epochms.Of(now.Add(-after))).StringSlice()
	if err != nil {
		return nil, s.fail("reclaim", err)
	}
	if len(dead) == 0 {
		return nil, nil
	}
	calls := make([]*call, s.parts)
	for p := range calls {
		args := append([]any{"reclaim", epochms.Of(now), s.k.wake(p)}, anySlice(dead)...)
		calls[p] = &call{sc: s.sc.leases, keys: s.leaseKeys(p), args: args}
	}
	s.eval(ctx, calls...)
	var out []store.Due
	released := 0
	for _, c := range calls {
		res, err := c.cmd.Slice()
		if err != nil {
			return out, s.fail("reclaim", err)
		}
		for _, r := range res {
			f, _ := r.([]any)
			if len(f) != 4 {
				return out, s.fail("reclaim", errCorrupt)
			}
			id, _ := f[0].(string)
			at, _ := f[1].(string)
			v, _ := f[2].(string)
			var d store.Due
			d.ID = id
			ms, err1 := strconv.ParseInt(at, 10, 64)
			v64, err2 := strconv.ParseInt(v, 10, 64)
			if id == "" || err1 != nil || err2 != nil {
				return out, s.fail("reclaim", errCorrupt)
			}
			d.At, d.Version = epochms.Time(ms), v64
			if n, _ := f[3].(int64); n == 1 {
				released++
			}
			out = append(out, d)
		}
	}
	if len(out) > 0 {
		s.log.LogAttrs(ctx, slog.LevelWarn, "redis: took back the leases of an instance that stopped beating",
			slog.Int("tasks", len(out)), slog.Int("unsent_released", released))
	}
	return out, nil
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

var (
	_ store.Instances   = (*Store)(nil)
	_ store.SendHorizon = (*Store)(nil)
	_ store.Fleet       = (*Store)(nil)
)

// InstancesAlive counts the instances that beat after now-within; see
// store.Fleet.
func (s *Store) InstancesAlive(ctx context.Context, now time.Time, within time.Duration) (int, error) {
	if err := s.open("instances alive"); err != nil {
		return 0, err
	}
	n, err := s.rdb.ZCount(ctx, s.k.beats(), "("+strconv.FormatInt(epochms.Of(now.Add(-within)), 10), "+inf").Result()
	if err != nil {
		return 0, s.fail("instances alive", err)
	}
	return int(n), nil
}

// joinAgain joins as a new instance if id, found dead, is still this
// Store's, so that its claims from then on are a live instance's: Beat and
// MaySend both find out, and a claim under a dead instance is refused at
// MaySend, uncharged but in vain, until the Store has joined again. The
// caller holds sendMu, so that only the first of them joins.
func (s *Store) joinAgain(ctx context.Context, id string, now time.Time) (string, error) {
	if cur := s.holder(); cur != id {
		return cur, nil
	}
	return s.Join(ctx, now)
}
