package redis

import (
	"context"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/prep"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// TaskFinish records outcomes of claimed attempts; see store.Store. The
// items of one partition are recorded by one script, atomically and in
// order. Items of several partitions are recorded by one script each, sent
// together; Redis Cluster cannot make them one atomic step, so when err is
// not nil some partitions' items may have been recorded. Calling again
// with the same items is safe: those already recorded then answer
// ErrLeaseLost.
func (s *Store) TaskFinish(ctx context.Context, fs []store.Finish) ([]error, error) {
	if err := s.open("finish"); err != nil {
		return nil, err
	}
	errs := make([]error, len(fs))
	if len(fs) == 0 {
		return errs, nil
	}
	ids := make([]string, len(fs))
	for i := range fs {
		ids[i] = fs[i].TaskID
	}
	locs, err := s.locate(ctx, ids)
	if err != nil {
		return nil, s.fail("finish", err)
	}
	batches := map[int]*finishBatch{}
	for i := range fs {
		f := &fs[i]
		if err := prep.Finish(f); err != nil {
			errs[i] = fmt.Errorf("redis: %w", err)
			continue
		}
		l, ok := locs[f.TaskID]
		if !ok {
			errs[i] = fmt.Errorf("redis: task %s: %w", f.TaskID, store.ErrNotFound)
			continue
		}
		b := batches[l.part]
		if b == nil {
			b = s.newFinishBatch(l.part)
			batches[l.part] = b
		}
		b.add(s, i, f, l)
	}
	calls := make([]*call, 0, len(batches))
	order := make([]*finishBatch, 0, len(batches))
	for _, b := range batches {
		calls = append(calls, &call{sc: s.sc.finish, keys: b.keys, args: b.args})
		order = append(order, b)
	}
	s.eval(ctx, calls...)
	for n, c := range calls {
		codes, err := c.cmd.Int64Slice()
		if err == nil && len(codes) != len(order[n].items) {
			err = fmt.Errorf("finish reply: %w", errCorrupt)
		}
		if err != nil {
			return nil, s.fail("finish", err)
		}
		for j, code := range codes {
			i := order[n].items[j]
			switch code {
			case 1:
				errs[i] = fmt.Errorf("redis: task %s: %w", fs[i].TaskID, store.ErrNotFound)
			case 2:
				errs[i] = fmt.Errorf("redis: task %s version %d: %w", fs[i].TaskID, fs[i].Version, store.ErrLeaseLost)
			}
		}
	}
	return errs, nil
}

// finishBatch is the finish script call of one partition: its keys (items
// name them by position), its arguments, and the index in fs of each item.
type finishBatch struct {
	keyList
	part  int
	args  []any
	items []int
}

func (s *Store) newFinishBatch(p int) *finishBatch {
	b := &finishBatch{part: p}
	for _, k := range []string{s.k.due(p), s.k.lease(p), s.k.counts(p), s.k.done(p), s.k.tenantCounts(p), s.k.held(p)} {
		b.key(k)
	}
	b.args = []any{s.k.wake(p), s.logCap}
	return b
}

// add appends item i, f, of the task at l; see lua/finish.lua for the
// arguments.
func (b *finishBatch) add(s *Store, i int, f *store.Finish, l loc) {
	now, next := prep.FinishTimes(f)
	entry := ""
	if f.Attempt.AttemptNumber > 0 {
		entry = encodeAttempt(&f.Attempt)
	}
	held := 0 // 1: take the claim's attempt back (store.Finish.Held)
	if f.Held {
		held = 1
	}
	live, dead := b.indexes(s.k.indexes(l, taskstate.Live)), 0
	if f.Status != store.Pending {
		dead = b.indexes(s.k.indexes(l, taskstate.Of(f.Status)))
	}
	b.args = append(b.args, f.TaskID, b.key(s.k.task(b.part, f.TaskID)), b.key(s.k.log(b.part, f.TaskID)), f.Version,
		string(f.Status), epochms.Of(next), int64(f.PrevDelay), f.LastError, f.LastStatus, epochms.Of(now), entry, live, dead,
		held)
	b.items = append(b.items, i)
}
