package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
)

// TaskCreate stores a new task or returns the one its idempotency key
// already names; see store.Store.
//
// Three records in three slots make a task: its idempotency key, its ID
// (both of which say where it lives) and its data in its partition. The
// first two are reserved together, then the create script writes the
// third. A create cut short between the two steps leaves reservations
// without a task: TaskGet does not find it, and a repeat of the request
// (same key, same request hash) finishes the job.
func (s *Store) TaskCreate(ctx context.Context, in *store.Task) (*store.Task, bool, error) {
	if err := s.open("create task"); err != nil {
		return nil, false, err
	}
	t := *in
	if err := t.CreateDefaults(); err != nil {
		return nil, false, fmt.Errorf("redis: create task: %w", err)
	}
	l := loc{part: s.Partition(t.Tenant, t.PolicyID), tenant: t.Tenant, policy: t.PolicyID}
	r, err := s.reserve(ctx, &t, l)
	if err != nil {
		return nil, false, s.fail("create task", err)
	}
	var stored *store.Task
	var created bool
	if r.fresh {
		stored, created, err = s.createNew(ctx, &t, l, r)
	} else {
		stored, created, err = s.createRepeat(ctx, &t, r)
	}
	if err != nil {
		return nil, false, fmt.Errorf("redis: create task: %w", err)
	}
	return stored, created, nil
}

// reservation is the outcome of TaskCreate's first step.
type reservation struct {
	idemKey, idemVal string // the idempotency key and the record this call offered
	fresh            bool   // the key was free and now names t
	prev             string // else, the record it held
	tookID           bool   // t's ID was free and is now reserved
	seq              int64  // a new creation sequence number
}

// reserve offers the idempotency key and the ID of t, and draws a creation
// sequence number, in one round trip.
func (s *Store) reserve(ctx context.Context, t *store.Task, l loc) (*reservation, error) {
	r := &reservation{idemKey: s.k.idem(t.Tenant, t.IdempotencyKey), idemVal: pack(t.ID, t.RequestHash, l.encode())}
	pipe := s.rdb.Pipeline()
	prev := pipe.SetArgs(ctx, r.idemKey, r.idemVal, goredis.SetArgs{Mode: "NX", Get: true})
	took := pipe.SetNX(ctx, s.k.id(t.ID), l.encode(), 0)
	seq := pipe.Incr(ctx, s.k.seq())
	_, _ = pipe.Exec(ctx)
	for _, err := range []error{prev.Err(), took.Err(), seq.Err()} {
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, err
		}
	}
	r.fresh, r.prev, r.tookID, r.seq = errors.Is(prev.Err(), goredis.Nil), prev.Val(), took.Val(), seq.Val()
	return r, nil
}

// createNew writes a task whose idempotency key this call reserved.
func (s *Store) createNew(ctx context.Context, t *store.Task, l loc, r *reservation) (*store.Task, bool, error) {
	if !r.tookID {
		c := &call{sc: s.sc.release, keys: []string{r.idemKey}, args: []any{r.idemVal}}
		s.eval(ctx, c)
		if err := c.cmd.Err(); err != nil {
			return nil, false, s.fail("release idempotency key", err)
		}
		return nil, false, fmt.Errorf("task id %s is taken: %w", t.ID, store.ErrConflict)
	}
	stored, created, err := s.write(ctx, t, l, r.seq)
	if err != nil {
		return nil, false, err
	}
	if created {
		stored = store.Created(t)
	}
	return stored, created, nil
}

// createRepeat handles a request whose idempotency key was taken: a
// conflict, a repeat, or the repeat of a create cut short, which it
// completes.
func (s *Store) createRepeat(ctx context.Context, t *store.Task, r *reservation) (*store.Task, bool, error) {
	f, err := unpack(r.prev)
	if err != nil || len(f) != 3 {
		return nil, false, errCorrupt
	}
	if r.tookID { // this call's own ID is not needed after all
		if err := s.rdb.Del(ctx, s.k.id(t.ID)).Err(); err != nil {
			return nil, false, s.fail("release task id", err)
		}
	}
	if f[1] != t.RequestHash {
		return nil, false, fmt.Errorf("idempotency key %q names another request: %w", t.IdempotencyKey, store.ErrConflict)
	}
	l, err := decodeLoc(f[2])
	if err != nil || l.part >= s.parts {
		return nil, false, errCorrupt
	}
	t.ID = f[0]
	if err := s.rdb.SetNX(ctx, s.k.id(t.ID), l.encode(), 0).Err(); err != nil {
		return nil, false, s.fail("reserve task id", err)
	}
	stored, created, err := s.write(ctx, t, l, r.seq)
	if err != nil {
		return nil, false, err
	}
	if created {
		stored = store.Created(t)
	}
	return stored, created, nil
}

// write runs the create script: it returns the stored task and false if
// the ID has one already, or nil and true once it made t.
func (s *Store) write(ctx context.Context, t *store.Task, l loc, seq int64) (*store.Task, bool, error) {
	ix := s.k.indexes(l, "LIVE")
	next := itoa(ms(t.NextAttemptAt))
	c := &call{sc: s.sc.create,
		keys: []string{s.k.task(l.part, t.ID), s.k.due(l.part), s.k.counts(l.part), ix[0], ix[1], ix[2]},
		args: append([]any{s.k.wake(l.part), t.ID, seq, next}, taskFields(t, seq)...)}
	s.eval(ctx, c)
	res, err := c.cmd.Result()
	if err != nil {
		return nil, false, s.fail("write task", err)
	}
	s.locs.put(t.ID, l)
	if pairs, ok := res.([]any); ok {
		stored, err := decodeTask(pairs)
		return stored, false, err
	}
	return nil, true, nil
}

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

// TaskCreateBatch creates tasks one after another.
// TODO(batch): one round trip and one commit for the whole batch.
func (s *Store) TaskCreateBatch(ctx context.Context, ts []*store.Task) ([]store.CreateResult, error) {
	res := make([]store.CreateResult, len(ts))
	for i, t := range ts {
		stored, created, err := s.TaskCreate(ctx, t)
		if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrInvalid) {
			return nil, err
		}
		res[i] = store.CreateResult{Task: stored, Created: created, Err: err}
	}
	return res, nil
}
