package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
)

// newTask is a valid item of TaskCreateBatch on its way into the store.
type newTask struct {
	i   int        // its index in the batch
	t   store.Task // the item with its defaults; a repeat takes the ID of the task it repeats
	l   loc        // where the task lives; a repeat's, where the one it repeats does
	key *idemKey
	seq int64 // a creation sequence number of its own

	stored  *store.Task // the outcome
	created bool
	err     error
}

// record is what x's idempotency key names once x has it: the task's ID,
// the request's hash and where the task lives.
func (x *newTask) record() string { return pack(x.t.ID, x.t.RequestHash, x.l.encode()) }

// idemKey follows one idempotency key of a batch from its reservation on.
type idemKey struct {
	name string             // its Redis key
	cmd  *goredis.StatusCmd // SET NX GET of the first item with the key
	held string             // the record the key holds in Redis
	ours bool               // held is this batch's reservation: the batch may change or release it
	rec  string             // the record the next item with the key sees: "" while the key is free
}

// taskID follows one task ID of a batch from its reservation on.
type taskID struct {
	id       string
	cmd      *goredis.BoolCmd // SET NX of the first item with the ID
	held     string           // the location its record names (or will name, when complete)
	ours     bool             // this batch reserved it
	used     bool             // a task of the batch is written under it
	want     string           // when used: another location its record must name first
	complete bool             // a repeat completes its record, which may be missing (SET NX)
}

// createPlan is what a batch's reservations found, and what each item does
// with them.
type createPlan struct {
	items    []*newTask
	keys     map[string]*idemKey
	keyOrder []*idemKey
	ids      map[string]*taskID
	idOrder  []*taskID
}

// reserve offers the idempotency key and the ID of every item (each key
// and ID once: the first item that names it), and draws a creation
// sequence number for each item, in one round trip.
func (s *Store) reserve(ctx context.Context, items []*newTask) (*createPlan, error) {
	p := &createPlan{items: items, keys: make(map[string]*idemKey, len(items)), ids: make(map[string]*taskID, len(items))}
	pipe := s.rdb.Pipeline()
	for _, x := range items {
		name := s.k.idem(x.t.Tenant, x.t.IdempotencyKey)
		k := p.keys[name]
		if k == nil {
			k = &idemKey{name: name, held: x.record()}
			k.cmd = pipe.SetArgs(ctx, name, k.held, goredis.SetArgs{Mode: "NX", Get: true})
			p.keys[name] = k
			p.keyOrder = append(p.keyOrder, k)
		}
		x.key = k
		if p.ids[x.t.ID] == nil {
			id := &taskID{id: x.t.ID, held: x.l.encode()}
			id.cmd = pipe.SetNX(ctx, s.k.id(x.t.ID), id.held, 0)
			p.ids[x.t.ID] = id
			p.idOrder = append(p.idOrder, id)
		}
	}
	seq := pipe.IncrBy(ctx, s.k.seq(), int64(len(items)))
	_, _ = pipe.Exec(ctx) // each cmd holds its own error
	for _, k := range p.keyOrder {
		prev, err := k.cmd.Result()
		switch {
		case errors.Is(err, goredis.Nil):
			k.ours = true
		case err != nil:
			return nil, err
		default:
			k.held, k.rec = prev, prev
		}
	}
	for _, id := range p.idOrder {
		took, err := id.cmd.Result()
		if err != nil {
			return nil, err
		}
		id.ours = took
	}
	last, err := seq.Result()
	if err != nil {
		return nil, err
	}
	for n, x := range items {
		x.seq = last - int64(len(items)-1-n)
	}
	return p, nil
}

// resolve decides what each item does, as if the items were created one
// after another in order: a repeat of the record its key names (which an
// earlier item may have written), a conflict, or a new task under its own
// ID, for which it takes the key.
func (p *createPlan) resolve(parts int) error {
	for _, x := range p.items {
		k := x.key
		if k.rec != "" {
			if err := p.repeat(x, parts); err != nil {
				return err
			}
			continue
		}
		id := p.ids[x.t.ID]
		if !id.ours || id.used {
			x.err = fmt.Errorf("redis: create task: task id %s is taken: %w", x.t.ID, store.ErrConflict)
			continue // the key stays free for the next item with it, if any
		}
		id.use(x.l.encode())
		k.rec = x.record()
	}
	return nil
}

// repeat makes x a repeat of the task its key names, or a conflict.
func (p *createPlan) repeat(x *newTask, parts int) error {
	f, err := unpack(x.key.rec)
	if err != nil || len(f) != 3 {
		return errCorrupt
	}
	if f[1] != x.t.RequestHash {
		x.err = fmt.Errorf("redis: create task: idempotency key %q names another request: %w", x.t.IdempotencyKey, store.ErrConflict)
		return nil
	}
	l, err := decodeLoc(f[2])
	if err != nil || l.part >= parts {
		return errCorrupt
	}
	x.t.ID, x.l = f[0], l
	// The task may not exist yet (its create was cut short), so its ID
	// record may be missing too: the repeat completes it.
	switch id := p.ids[x.t.ID]; {
	case id == nil:
		id = &taskID{id: x.t.ID, held: l.encode(), used: true, complete: true}
		p.ids[x.t.ID] = id
		p.idOrder = append(p.idOrder, id)
	case id.ours && !id.used:
		id.use(l.encode())
	}
	return nil
}

// use marks a reserved ID used by a task at location where.
func (id *taskID) use(where string) {
	id.used = true
	if where != id.held {
		id.want = where
	}
}
