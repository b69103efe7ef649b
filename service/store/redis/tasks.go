package redis

import (
	"context"
	"fmt"
	"slices"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/prep"
	"github.com/retrykit/retry/service/store/internal/taskstate"
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
	now, err := prep.Transition(&tr)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	for _, st := range tr.From {
		if !taskstate.Known(st) {
			return nil, fmt.Errorf("redis: transition from %q: %w", st, store.ErrInvalid)
		}
	}
	l, ok, err := s.locateOne(ctx, tr.Tenant, tr.TaskID)
	if err != nil {
		return nil, s.fail("transition", err)
	}
	if !ok {
		return nil, fmt.Errorf("redis: task %s: %w", tr.TaskID, store.ErrNotFound)
	}
	p := l.part
	keys := []string{s.k.task(p, tr.TaskID), s.k.due(p), s.k.lease(p), s.k.counts(p), s.k.done(p),
		s.k.tenantCounts(p)}
	args := []any{s.k.wake(p), tr.TaskID, string(tr.To), epochms.Of(now), len(tr.From)}
	states := []string{taskstate.Of(tr.To)}
	for _, st := range tr.From {
		args = append(args, string(st))
		if state := taskstate.Of(st); !slices.Contains(states, state) {
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
