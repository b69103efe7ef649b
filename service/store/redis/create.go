package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// createRuns is how many TaskCreateBatch calls the TaskCreate coalescer
// keeps under way at once. Measured with BenchmarkCreate on a loaded
// 2-core VM, the server local (five interleaved runs, medians): 1 and 2
// ran alike (19,800 and 22,500 creates/s from 8 callers, 22,900 and 26,600
// from 16, some 20–30 µs of client CPU per create either way), 4 and 8
// worse (smaller batches: more round trips and more CPU per create). Of
// the two, 2, so that a create arriving while a batch is under way starts
// at once instead of waiting for it to end: that wait is a whole round
// trip or two, which costs more when the server is a network hop away.
const createRuns = 2

// TaskCreate stores a new task or returns the one its idempotency key
// already names; see store.Store. Concurrent calls share their round trips:
// a coalescer hands them to TaskCreateBatch together, waiting for company
// only while the server is busy and recent batches held more (package
// linger; retryd bench, 8 clients: 9,802–10,005 tasks/s against
// 9,514–9,736), so a lone call costs what a batch of one does (one round trip
// for a new task on a single server, two on a cluster, three for a repeat
// on a single server: see createFast).
func (s *Store) TaskCreate(ctx context.Context, in *store.Task) (*store.Task, bool, error) {
	if err := s.open("create task"); err != nil {
		return nil, false, err
	}
	t := *in // the batch may still read it after a cancelled Do returns
	r, err := s.creates.Do(ctx, &t)
	if err != nil {
		return nil, false, s.fail("create task", err)
	}
	return r.Task, r.Created, r.Err
}

// TaskCreateBatch creates tasks as if one after another in order; see
// store.Store.
//
// Three records in three slots make a task: its idempotency key, its ID
// (both of which say where it lives) and its data in its partition. The
// first two of every task are reserved in one pipeline (with the sequence
// numbers, one INCRBY), then one create script per partition writes the
// partition's tasks, with the clean-up of reservations the batch did not
// need in the same pipeline: two round trips whatever the batch's size. A
// third, before the scripts, comes only when an item takes over what an
// earlier one of the batch reserved and gave up (the idempotency key of
// an item whose ID was taken; an ID a repeat did not need, for another
// tenant or policy). On a single server, new tasks of one partition skip
// the reservations' round trip (createFast).
//
// A create cut short between the steps leaves reservations without a
// task: TaskGet does not find it, and a repeat of the request (same key,
// same request hash) finishes the job. So when err is not nil, the call
// may have created some of the tasks (each partition's script is a step of
// its own, on a Redis Cluster on a shard of its own), but calling again
// with the same items, idempotency keys included, creates the others and
// answers the created ones as repeats.
func (s *Store) TaskCreateBatch(ctx context.Context, ts []*store.Task) ([]store.CreateResult, error) {
	if err := s.open("create tasks"); err != nil {
		return nil, err
	}
	res, err := s.createBatch(ctx, ts)
	if err != nil {
		return nil, s.fail("create tasks", err)
	}
	return res, nil
}

// createBatch is TaskCreateBatch, its error not wrapped yet: the
// coalescer's batches run it too.
func (s *Store) createBatch(ctx context.Context, ts []*store.Task) ([]store.CreateResult, error) {
	res := make([]store.CreateResult, len(ts))
	items := s.newTasks(ts, res)
	if len(items) == 0 {
		return res, nil
	}
	done, err := s.createFast(ctx, items)
	if err == nil && !done {
		err = s.createReserved(ctx, items)
	}
	if err != nil {
		return nil, err
	}
	for _, x := range items {
		res[x.i] = store.CreateResult{Task: x.stored, Created: x.created, Err: x.err}
	}
	return res, nil
}

// createReserved creates items the general way: their records reserved
// in a round trip of its own, then written (see TaskCreateBatch).
func (s *Store) createReserved(ctx context.Context, items []*newTask) error {
	p, err := s.reserve(ctx, items)
	if err != nil {
		return err
	}
	if err := p.resolve(s.parts); err != nil {
		return err
	}
	if err := s.takeOver(ctx, p); err != nil {
		return err
	}
	return s.write(ctx, p)
}

// createFast creates items in one round trip instead of two, with
// lua/createfast.lua, when it can: on a single server (one script may
// then take records in any slot), when the items all go to one partition,
// and no two share an idempotency key or an ID (the script takes no
// decision between items). It reports false, having written nothing, when
// it could not or any item is not new; createReserved then sorts them out,
// so a batch with a repeat in it costs a round trip more than before.
// Single creates through the API (retryd bench --mode api --runs single,
// three interleaved pairs): 7,238–7,736 → 7,745–9,237 tasks/s, retryd's
// CPU per task 113–124 → 90–112 µs; batches of 100 alike.
func (s *Store) createFast(ctx context.Context, items []*newTask) (bool, error) {
	if !s.oneServer.Load() {
		return false, nil
	}
	part := items[0].l.part
	seen := make(map[string]bool, 2*len(items))
	for _, x := range items {
		idem, id := s.k.idem(x.t.Tenant, x.t.IdempotencyKey), s.k.id(x.t.ID)
		if x.l.part != part || seen[idem] || seen[id] {
			return false, nil
		}
		seen[idem], seen[id] = true, true
	}
	c := s.newCreateCall(part, len(items), true)
	for _, x := range items {
		c.add(s, x)
	}
	c.run = &call{sc: s.sc.createFast, keys: c.keys, args: c.args}
	s.eval(ctx, c.run)
	first, err := c.run.cmd.Int64()
	if goredis.HasErrorPrefix(err, "CROSSSLOT") {
		// A server that turned cluster mode on since Open: the script
		// was refused, so it wrote nothing.
		s.oneServer.Store(false)
		return false, nil
	}
	if err != nil || first == 0 {
		return false, err
	}
	for j, x := range items {
		x.seq = first + int64(j)
		x.stored, x.created = store.CreatedBy(&x.t, c.holder), true
		s.locs.put(x.t.ID, x.l)
	}
	return true, nil
}

// newTasks returns the valid items of ts with their defaults, where they
// go, and the index of each; res gets the errors of the others.
func (s *Store) newTasks(ts []*store.Task, res []store.CreateResult) []*newTask {
	items := make([]*newTask, 0, len(ts))
	for i, in := range ts {
		x := &newTask{i: i, t: *in}
		if err := x.t.CreateDefaults(); err != nil {
			res[i].Err = fmt.Errorf("redis: create task: %w", err)
			continue
		}
		x.l = loc{part: s.Partition(x.t.Tenant, x.t.PolicyID), tenant: x.t.Tenant, policy: x.t.PolicyID}
		items = append(items, x)
	}
	return items
}

// takeOver points the records that items take over from earlier items of
// the batch at their new owners, before their tasks are written: a task
// must never exist under records naming another.
func (s *Store) takeOver(ctx context.Context, p *createPlan) error {
	var sets [][2]string
	for _, k := range p.keyOrder {
		if k.ours && k.rec != "" && k.rec != k.held {
			sets = append(sets, [2]string{k.name, k.rec})
		}
	}
	for _, id := range p.idOrder {
		if id.ours && id.used && id.want != "" {
			sets = append(sets, [2]string{s.k.id(id.id), id.want})
		}
	}
	if len(sets) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, kv := range sets {
		pipe.Set(ctx, kv[0], kv[1], 0)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// write runs the create script of each partition the batch's tasks go
// to, in one pipeline with the records a repeat completes and the release
// of the reservations no item used, and records the outcome in each item.
func (s *Store) write(ctx context.Context, p *createPlan) error {
	byPart := map[int]*createCall{}
	perPart := map[int]int{}
	for _, x := range p.items {
		if x.err == nil {
			perPart[x.l.part]++
		}
	}
	var creates []*createCall
	for _, x := range p.items {
		if x.err != nil {
			continue
		}
		c := byPart[x.l.part]
		if c == nil {
			c = s.newCreateCall(x.l.part, perPart[x.l.part], false)
			byPart[x.l.part] = c
			creates = append(creates, c)
		}
		c.add(s, x)
	}
	calls := make([]*call, len(creates))
	for n, c := range creates {
		c.run = &call{sc: s.sc.create, keys: c.keys, args: c.args}
		calls[n] = c.run
	}
	for _, k := range p.keyOrder {
		if k.ours && k.rec == "" { // its items' IDs were all taken
			calls = append(calls, &call{sc: s.sc.release, keys: []string{k.name}, args: []any{k.held}})
		}
	}
	var pipe goredis.Pipeliner // only for repeats: a lone create goes without
	var setnx []*goredis.BoolCmd
	for _, id := range p.idOrder {
		switch {
		case id.ours && !id.used:
			calls = append(calls, &call{sc: s.sc.release, keys: []string{s.k.id(id.id)}, args: []any{id.held}})
		case id.complete:
			if pipe == nil {
				pipe = s.rdb.Pipeline()
			}
			setnx = append(setnx, pipe.SetNX(ctx, s.k.id(id.id), id.held, 0))
		}
	}
	if pipe == nil {
		s.eval(ctx, calls...)
	} else {
		s.evalWith(ctx, pipe, calls...)
	}
	for _, cmd := range setnx {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	for _, c := range calls[len(creates):] {
		if err := c.cmd.Err(); err != nil {
			return err
		}
	}
	for _, c := range creates {
		if err := s.created(c); err != nil {
			return err
		}
	}
	return nil
}

// created reads the create script's reply into its items.
func (s *Store) created(c *createCall) error {
	replies, err := c.run.cmd.Slice()
	if err != nil {
		return err
	}
	if len(replies) != len(c.items) {
		return fmt.Errorf("create reply of %d items for %d: %w", len(replies), len(c.items), errCorrupt)
	}
	for j, x := range c.items {
		switch r := replies[j].(type) {
		case int64:
			if r == 0 {
				x.err = fmt.Errorf("redis: create task: task id %s holds another request's task: %w", x.t.ID, store.ErrConflict)
				continue
			}
			x.stored, x.created = store.CreatedBy(&x.t, c.holder), true
		case []any:
			if x.stored, err = decodeTask(r); err != nil {
				return err
			}
		default:
			return fmt.Errorf("create reply %T: %w", r, errCorrupt)
		}
		s.locs.put(x.t.ID, x.l)
	}
	return nil
}

// CreatesClaimed marks the Store as a store.CreateClaimer: lua/create.lua
// creates claimed the tasks that ask for it.
func (s *Store) CreatesClaimed() {}

var _ store.CreateClaimer = (*Store)(nil)

// createCall is the create script call of one partition: its keys (tasks
// name them by position), its arguments and its tasks, in batch order.
type createCall struct {
	keyList
	args   []any
	items  []*newTask
	run    *call
	holder string // the instance that holds the tasks created claimed
	fast   bool   // lua/createfast.lua's call, which takes the tasks' records too
}

// newCreateCall starts the call of partition p, with room for n tasks:
// grown one task at a time, a batch of 100 allocated its arguments about
// twice over. fast makes it lua/createfast.lua's.
func (s *Store) newCreateCall(p, n int, fast bool) *createCall {
	per, keys := argsPerTask, 6+n
	if fast {
		per, keys = per+3, keys+1+2*n
	}
	c := &createCall{args: make([]any, 0, 3+n*per), items: make([]*newTask, 0, n), holder: s.holder(), fast: fast}
	c.args = append(c.args, s.k.wake(p), 0, c.holder) // the number of fields is set by add
	c.keys = append(make([]string, 0, keys), s.k.due(p), s.k.counts(p), s.k.refs(p), s.k.tenantCounts(p),
		s.k.lease(p), s.k.held(p))
	if fast {
		c.keys = append(c.keys, s.k.seq())
	}
	return c
}

// argsPerTask is how many arguments add appends for a task of
// lua/create.lua: three, then taskFields'.
const argsPerTask = 3 + 2*taskFieldCount

// add appends x; see lua/create.lua and lua/createfast.lua for the
// arguments.
func (c *createCall) add(s *Store, x *newTask) {
	// Each task's hash key is its own (but a repeat's, which is harmless
	// twice): no need to look it up among the others.
	c.keys = append(c.keys, s.k.task(x.l.part, x.t.ID))
	task := len(c.keys)
	lease := int64(0)
	if x.t.ClaimAtCreate() {
		lease = epochms.Of(x.t.LeaseUntil)
	}
	c.args = append(c.args, task, c.indexes(s.k.indexes(x.l, taskstate.Live)), lease)
	if c.fast {
		// The same records reserve takes; createfast.lua sets the seq
		// field taskFields is given 0 for.
		c.keys = append(c.keys, s.k.idem(x.t.Tenant, x.t.IdempotencyKey), s.k.id(x.t.ID))
		c.args = append(c.args, len(c.keys)-1, x.record(), x.l.encode())
	}
	n := len(c.args)
	c.args = taskFields(c.args, &x.t, x.seq, c.holder)
	c.args[1] = (len(c.args) - n) / 2
	c.items = append(c.items, x)
}
