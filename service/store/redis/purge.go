package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// The retention sweep's records: each partition's done set lists its
// terminal tasks by when they ended (finish and transition keep it), and
// its refs hash counts the tasks holding each body reference (create and
// purge keep it). A store written before they existed has terminal tasks
// missing from the done sets: the first TaskPurge of a Store adds them
// (backfillDone) and marks the store's config so that no later one does.
// The refs hashes have no such backfill: tasks with body references
// came with them.

// configDone is the config field saying the done sets are complete.
const configDone = "done-index"

// purgeRounds bounds how often TaskPurge reads candidates again when
// stale entries of the done sets (tasks redriven since) made a round
// delete fewer tasks than it found.
const purgeRounds = 3

// TaskPurge deletes old terminal tasks with their attempt logs; see
// store.Purger. It reads the oldest entries of every partition's done set,
// then the tasks, then deletes those still terminal and unchanged, one
// script per partition, and then releases their ID and idempotency key
// records, which live in other slots. The scripts first note the records
// in their partition's purged list, so that records a failed call did not
// release are released by the next one.
func (s *Store) TaskPurge(ctx context.Context, before time.Time, limit int) ([]string, int, error) {
	if err := s.open("purge"); err != nil {
		return nil, 0, err
	}
	limit = store.PurgeLimit(limit)
	if err := s.backfillDone(ctx); err != nil {
		return nil, 0, s.fail("purge: fill the done index", err)
	}
	if err := s.releasePurged(ctx); err != nil {
		return nil, 0, s.fail("purge", err)
	}
	var refs []string
	n := 0
	for range purgeRounds {
		found, got, err := s.purgeRound(ctx, epochms.Of(before), limit-n)
		if rerr := s.release(ctx, got); rerr != nil || err != nil {
			return nil, 0, s.fail("purge", errors.Join(err, rerr))
		}
		for _, x := range got {
			if x.ref != "" {
				refs = append(refs, x.ref)
			}
		}
		n += len(got)
		if n == limit || len(got) == found {
			break
		}
	}
	slices.Sort(refs)
	return slices.Compact(refs), n, nil
}

// purgeItem is a task TaskPurge found in a done set.
type purgeItem struct {
	part  int
	id    string
	at    float64
	ref   string
	entry string // its purged list entry
}

// purgeRound deletes up to limit tasks that ended before before (ms),
// returning how many it found due and those it deleted, whose records the
// caller releases (even when err is not nil: the deletions it reports
// stand).
func (s *Store) purgeRound(ctx context.Context, before int64, limit int) (int, []*purgeItem, error) {
	pipe := s.rdb.Pipeline()
	cands := make([]*goredis.ZSliceCmd, s.parts)
	for p := range s.parts {
		cands[p] = pipe.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: s.k.done(p), Start: "-inf",
			Stop: "(" + itoa(before), ByScore: true, Count: int64(limit)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, nil, err
	}
	var items []*purgeItem
	for p, cmd := range cands {
		for _, z := range cmd.Val() {
			id, _ := z.Member.(string)
			items = append(items, &purgeItem{part: p, id: id, at: z.Score})
		}
	}
	slices.SortFunc(items, func(a, b *purgeItem) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id)) })
	items = items[:min(len(items), limit)]
	if len(items) == 0 {
		return 0, nil, nil
	}

	pipe = s.rdb.Pipeline()
	fields := make([]*goredis.SliceCmd, len(items))
	for i, x := range items {
		fields[i] = pipe.HMGet(ctx, s.k.task(x.part, x.id), "st", "tn", "pol", "seq", "br", "ik", "rh")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, nil, err
	}
	byPart := map[int]*purgeCall{}
	var calls []*purgeCall
	for i, x := range items {
		c := byPart[x.part]
		if c == nil {
			c = &purgeCall{args: []any{before}}
			for _, k := range []string{s.k.done(x.part), s.k.counts(x.part), s.k.refs(x.part), s.k.purged(x.part),
				s.k.tenantCounts(x.part)} {
				c.key(k)
			}
			byPart[x.part] = c
			calls = append(calls, c)
		}
		c.add(s, x, fields[i].Val())
	}
	runs := make([]*call, len(calls))
	for i, c := range calls {
		runs[i] = &call{sc: s.sc.purge, keys: c.keys, args: c.args}
	}
	s.eval(ctx, runs...)
	var got []*purgeItem
	var errs []error
	for i, r := range runs {
		codes, err := r.cmd.Int64Slice()
		if err == nil && len(codes) != len(calls[i].items) {
			err = fmt.Errorf("purge reply: %w", errCorrupt)
		}
		if err != nil {
			errs = append(errs, err) // the other partitions' deletions stand: release their records
			continue
		}
		for j, code := range codes {
			if code == 1 {
				x := calls[i].items[j]
				got = append(got, x)
			}
		}
	}
	ids := make([]string, len(got))
	for i, x := range got {
		ids[i] = x.id
	}
	s.locs.forget(ids)
	return len(items), got, errors.Join(errs...)
}

// purgeCall is the purge script call of one partition.
type purgeCall struct {
	keyList
	args  []any
	items []*purgeItem
}

// add appends x, whose task hash holds f (st, tn, pol, seq, br, ik, rh,
// nil for a field it lacks); see lua/purge.lua for the arguments. A task
// that is gone, or not terminal, is passed all the same: the script takes
// its stale entry out of the done set.
func (c *purgeCall) add(s *Store, x *purgeItem, f []any) {
	str := func(i int) string {
		if i < len(f) {
			v, _ := f[i].(string)
			return v
		}
		return ""
	}
	st, tn, pol, seq := str(0), str(1), str(2), str(3)
	task, log := c.key(s.k.task(x.part, x.id)), c.key(s.k.log(x.part, x.id))
	ix := task // any key: the script reads the indexes of terminal tasks only
	if store.Status(st).Terminal() {
		l := loc{part: x.part, tenant: tn, policy: pol}
		ix = c.indexes(s.k.indexes(l, taskstate.Of(store.Status(st))))
		x.ref = str(4)
		x.entry = pack(s.k.idem(tn, str(5)), pack(x.id, str(6), l.encode()), s.k.id(x.id), l.encode())
	}
	c.args = append(c.args, x.id, task, log, ix, seq, st, x.entry)
	c.items = append(c.items, x)
}

// releasePurged releases the records that earlier purges noted and did
// not release: a purge that failed half-way.
func (s *Store) releasePurged(ctx context.Context) error {
	pipe := s.rdb.Pipeline()
	lists := make([]*goredis.StringSliceCmd, s.parts)
	for p := range s.parts {
		lists[p] = pipe.LRange(ctx, s.k.purged(p), 0, store.MaxPurgeLimit-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	var left []*purgeItem
	for p, cmd := range lists {
		for _, e := range cmd.Val() {
			left = append(left, &purgeItem{part: p, entry: e})
		}
	}
	return s.release(ctx, left)
}

// release deletes the ID and idempotency key records that the purged list
// entries of items name, each if it still names the purged task, and then
// the entries.
func (s *Store) release(ctx context.Context, items []*purgeItem) error {
	if len(items) == 0 {
		return nil
	}
	byEntry := make(map[string]int, len(items))
	for _, x := range items {
		byEntry[x.entry] = x.part
	}
	var calls []*call
	for e := range byEntry {
		f, err := unpack(e)
		if err != nil || len(f) != 4 {
			continue // not ours to read: leave it
		}
		calls = append(calls, &call{sc: s.sc.release, keys: []string{f[0]}, args: []any{f[1]}},
			&call{sc: s.sc.release, keys: []string{f[2]}, args: []any{f[3]}})
	}
	s.eval(ctx, calls...)
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil {
			return err
		}
	}
	pipe := s.rdb.Pipeline()
	for e, p := range byEntry {
		pipe.LRem(ctx, s.k.purged(p), 1, e)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// backfillDone adds to the done sets the terminal tasks a store written
// before they existed holds, once per store (the config records it). It
// walks each partition's lists of terminal tasks by creation order.
func (s *Store) backfillDone(ctx context.Context) error {
	if s.doneFilled.Load() {
		return nil
	}
	v, err := s.rdb.HGet(ctx, s.k.config(), configDone).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	if v != "1" {
		for p := range s.parts {
			for _, st := range taskstate.All()[1:] {
				if err := s.backfillIndex(ctx, p, s.k.index(p, st, scopeAll, "", "")); err != nil {
					return err
				}
			}
		}
		if err := s.rdb.HSet(ctx, s.k.config(), configDone, "1").Err(); err != nil {
			return err
		}
	}
	s.doneFilled.Store(true)
	return nil
}

// backfillIndex adds the tasks of one terminal list index of partition p
// to its done set, those already there keeping their entry. A task
// redriven meanwhile may get a stale entry, which TaskPurge removes.
func (s *Store) backfillIndex(ctx context.Context, p int, index string) error {
	from := "-inf"
	for {
		zs, err := s.rdb.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: index, Start: from, Stop: "+inf",
			ByScore: true, Count: store.DueBatch}).Result()
		if err != nil || len(zs) == 0 {
			return err
		}
		pipe := s.rdb.Pipeline()
		ends := make([]*goredis.StringCmd, len(zs))
		for i, z := range zs {
			id, _ := z.Member.(string)
			ends[i] = pipe.HGet(ctx, s.k.task(p, id), "f")
		}
		_, _ = pipe.Exec(ctx) // a missing task answers Nil
		var adds []goredis.Z
		for i, cmd := range ends {
			f, err := strconv.ParseInt(cmd.Val(), 10, 64)
			if err == nil && f > 0 {
				adds = append(adds, goredis.Z{Score: float64(f), Member: zs[i].Member})
			}
		}
		if len(adds) > 0 {
			if err := s.rdb.ZAddNX(ctx, s.k.done(p), adds...).Err(); err != nil {
				return err
			}
		}
		if len(zs) < store.DueBatch {
			return nil
		}
		from = "(" + strconv.FormatFloat(zs[len(zs)-1].Score, 'f', -1, 64)
	}
}

// BodyRefsInUse tells which of refs some task holds; see store.Purger. It
// reads every partition's reference counts, in one round trip per
// store.MaxPurgeLimit references.
func (s *Store) BodyRefsInUse(ctx context.Context, refs []string) (map[string]bool, error) {
	if err := s.open("body refs in use"); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for chunk := range slices.Chunk(refs, store.MaxPurgeLimit) {
		pipe := s.rdb.Pipeline()
		cmds := make([]*goredis.SliceCmd, s.parts)
		for p := range s.parts {
			cmds[p] = pipe.HMGet(ctx, s.k.refs(p), chunk...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, s.fail("body refs in use", err)
		}
		for _, cmd := range cmds {
			for i, v := range cmd.Val() {
				if n, _ := v.(string); n != "" && n != "0" && chunk[i] != "" {
					out[chunk[i]] = true
				}
			}
		}
	}
	return out, nil
}

var _ store.Purger = (*Store)(nil)
