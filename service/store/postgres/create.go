package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
	"github.com/retrykit/retry/service/store/internal/headerjson"
)

// deadlockTries bounds the runs of a batch that PostgreSQL aborted to
// break a deadlock. Rows are inserted in key order, so batches sharing
// keys wait for each other without deadlocking; a cycle needs task IDs
// shared in another order, or a batch of several segments.
const deadlockTries = 3

// TaskCreateBatch creates tasks in one round trip and one commit; see
// store.Store. A task whose ID is too long for its notification (nearly
// 8000 bytes) is refused as store.ErrInvalid.
//
// A batch of one task, what a lone TaskCreate makes, takes a statement of
// its own, cheaper than createSQL's arrays and lookup: a lone caller
// creates as fast as it did before creates were batched.
func (s *Store) TaskCreateBatch(ctx context.Context, ts []*store.Task) ([]store.CreateResult, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	p := planCreate(ts)
	p.instance = s.holder()
	run := s.runCreate
	if len(p.segments) == 1 && len(p.segments[0]) == 1 {
		run = s.createOne
	}
	for try := 1; len(p.segments) > 0; try++ {
		p.inserted, p.holder, p.existing = make([]bool, len(p.ts)), map[taskKey]int{}, map[taskKey]*store.Task{}
		err := run(ctx, p)
		if err == nil {
			break
		}
		var pe *pgconn.PgError
		if try == deadlockTries || !errors.As(err, &pe) || pe.Code != "40P01" {
			return nil, s.fail("create tasks", err)
		}
	}
	return p.results(), nil
}

// CreatesClaimed marks the Store as a store.CreateClaimer: createSQL and
// createOneSQL create claimed the tasks that ask for it.
func (s *Store) CreatesClaimed() {}

var _ store.CreateClaimer = (*Store)(nil)

// taskKey is a task's (tenant, idempotency key).
type taskKey struct{ tenant, key string }

func keyOf(t *store.Task) taskKey { return taskKey{t.Tenant, t.IdempotencyKey} }

// createPlan is a batch on its way through TaskCreateBatch.
type createPlan struct {
	ts      []store.Task // the items, with their defaults
	res     []store.CreateResult
	headers []string
	notes   []string
	// segments list the items to insert, each sorted by key (then
	// position), so that concurrent batches lock keys in one order. Items
	// sharing an ID under different keys go to different segments, run in
	// order: which of them is inserted depends on whether the earlier ones
	// were, as it would one task after another. An item repeating an
	// earlier one's ID and key is in none; results works it out.
	segments [][]int

	instance string // the holder of the leases of items created claimed

	// What the database said, reset by each run.
	inserted []bool
	holder   map[taskKey]int         // the item whose insert took each key
	existing map[taskKey]*store.Task // the other tasks holding keys of skipped items
}

// planCreate checks and orders the items of a batch.
func planCreate(in []*store.Task) *createPlan {
	n := len(in)
	p := &createPlan{ts: make([]store.Task, n), res: make([]store.CreateResult, n), headers: make([]string, n),
		notes: make([]string, n)}
	type idKey struct {
		id string
		k  taskKey
	}
	seen := map[idKey]bool{}
	var seg []int
	segIDs := map[string]bool{}
	for i, t := range in {
		p.ts[i] = *t
		if err := p.check(i); err != nil {
			p.res[i].Err = fmt.Errorf("postgres: create task: %w", err)
			continue
		}
		t := &p.ts[i]
		ik := idKey{t.ID, keyOf(t)}
		if seen[ik] {
			continue
		}
		seen[ik] = true
		if segIDs[t.ID] {
			p.segments, seg = append(p.segments, seg), nil
			clear(segIDs)
		}
		seg, segIDs[t.ID] = append(seg, i), true
	}
	if len(seg) > 0 {
		p.segments = append(p.segments, seg)
	}
	for _, seg := range p.segments {
		slices.SortFunc(seg, func(a, b int) int {
			ta, tb := &p.ts[a], &p.ts[b]
			return cmp.Or(cmp.Compare(ta.Tenant, tb.Tenant), cmp.Compare(ta.IdempotencyKey, tb.IdempotencyKey),
				cmp.Compare(a, b))
		})
	}
	return p
}

// check fills in item i's defaults and encodings, or says why it is refused.
func (p *createPlan) check(i int) error {
	t := &p.ts[i]
	if err := t.CreateDefaults(); err != nil {
		return err
	}
	if !textOK(t.ID, t.Tenant, t.IdempotencyKey, t.RequestHash, t.PolicyID, t.Method, t.TargetURL, t.BodyRef) {
		return fmt.Errorf("a field holds a NUL byte or invalid UTF-8: %w", store.ErrInvalid)
	}
	headers, err := headerjson.Encode(t.Headers)
	if err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	p.headers[i] = headers
	p.notes[i] = feed.Note(store.Due{ID: t.ID, At: t.NextAttemptAt, Version: 1})
	if len(p.notes[i]) > notifyMax {
		return fmt.Errorf("task id of %d bytes: too long to notify: %w", len(t.ID), store.ErrInvalid)
	}
	return nil
}

// results answers each item as TaskCreate would have, one after another:
// an item not inserted is a repeat of, or conflicts with, the task that
// held its key by then; if none did, its ID was taken.
func (p *createPlan) results() []store.CreateResult {
	for i := range p.ts {
		if p.res[i].Err != nil {
			continue
		}
		t := &p.ts[i]
		if p.inserted[i] {
			p.res[i] = store.CreateResult{Task: store.CreatedBy(t, p.instance), Created: true}
			continue
		}
		var held *store.Task // nil when the key was free when item i came
		if j, ours := p.holder[keyOf(t)]; ours {
			if j < i {
				held = store.CreatedBy(&p.ts[j], p.instance)
			}
		} else if e, ok := p.existing[keyOf(t)]; ok {
			held = clone(e)
		}
		switch {
		case held == nil:
			p.res[i].Err = fmt.Errorf("postgres: create task: task id %s is taken: %w", t.ID, store.ErrConflict)
		case held.RequestHash != t.RequestHash:
			p.res[i].Err = fmt.Errorf("postgres: create task: idempotency key %q names another request: %w",
				t.IdempotencyKey, store.ErrConflict)
		default:
			p.res[i] = store.CreateResult{Task: held}
		}
	}
	return p.res
}

// clone returns a copy of t that shares nothing with it.
func clone(t *store.Task) *store.Task {
	c := *t
	c.Headers, c.Body = maps.Clone(t.Headers), bytes.Clone(t.Body)
	return &c
}
