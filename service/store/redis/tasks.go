package redis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/retrykit/retry/service/store"
)

// TaskGet returns one task of tenant.
func (s *Store) TaskGet(ctx context.Context, tenant, id string) (*store.Task, error) {
	if err := s.open("get task"); err != nil {
		return nil, err
	}
	l, ok, err := s.locateOne(ctx, tenant, id)
	if err != nil {
		return nil, s.fail("get task", err)
	}
	if !ok {
		return nil, fmt.Errorf("redis: task %s: %w", id, store.ErrNotFound)
	}
	m, err := s.rdb.HGetAll(ctx, s.k.task(l.part, id)).Result()
	if err != nil {
		return nil, s.fail("get task", err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("redis: task %s: %w", id, store.ErrNotFound)
	}
	t, err := decodeTask(flatten(m))
	return t, s.fail("get task", err)
}

// TaskTransition cancels or redrives a task; see store.Store.
func (s *Store) TaskTransition(ctx context.Context, tr store.Transition) (*store.Task, error) {
	if err := s.open("transition"); err != nil {
		return nil, err
	}
	if tr.To != store.Cancelled && tr.To != store.Pending {
		return nil, fmt.Errorf("redis: transition to %q: %w", tr.To, store.ErrInvalid)
	}
	for _, st := range tr.From {
		if !known(st) {
			return nil, fmt.Errorf("redis: transition from %q: %w", st, store.ErrInvalid)
		}
	}
	now := tr.Now
	if now.IsZero() {
		now = time.Now()
	}
	l, ok, err := s.locateOne(ctx, tr.Tenant, tr.TaskID)
	if err != nil {
		return nil, s.fail("transition", err)
	}
	if !ok {
		return nil, fmt.Errorf("redis: task %s: %w", tr.TaskID, store.ErrNotFound)
	}
	p := l.part
	keys := []string{s.k.task(p, tr.TaskID), s.k.due(p), s.k.lease(p), s.k.counts(p)}
	args := []any{s.k.wake(p), tr.TaskID, string(tr.To), ms(now), len(tr.From)}
	states := []string{stateOf(tr.To)}
	for _, st := range tr.From {
		args = append(args, string(st))
		if state := stateOf(st); !slices.Contains(states, state) {
			states = append(states, state)
		}
	}
	for _, state := range states {
		ix := s.k.indexes(l, state)
		keys = append(keys, ix[:]...)
		args = append(args, state)
	}
	c := &call{sc: s.sc.transition, keys: keys, args: args}
	s.eval(ctx, c)
	res, err := c.cmd.Slice()
	if err != nil {
		return nil, s.fail("transition", err)
	}
	switch code, _ := res[0].(int64); code {
	case 1:
		return nil, fmt.Errorf("redis: task %s: %w", tr.TaskID, store.ErrNotFound)
	case 2:
		return nil, fmt.Errorf("redis: task %s is not in %v: %w", tr.TaskID, tr.From, store.ErrConflict)
	}
	pairs, _ := res[1].([]any)
	t, err := decodeTask(pairs)
	return t, s.fail("transition", err)
}

func known(st store.Status) bool {
	switch st {
	case store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed, store.Cancelled:
		return true
	}
	return false
}
