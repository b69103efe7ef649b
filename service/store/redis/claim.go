package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// claimRounds bounds how often TaskClaim looks again for due tasks when
// other claimers took some of those it picked.
const claimRounds = 3

// claimed is a task TaskClaim leased and when it was due.
type claimed struct {
	due int64
	t   *store.Task
}

// TaskClaim leases due tasks; see store.Store. Only the partitions this
// Store claims from are served (see WithClaimPartitions): other IDs are
// skipped like unknown ones.
//
// Within a partition tasks are claimed earliest due first. Across
// partitions, when more tasks are due than p.Limit, the limit is shared
// out evenly (round robin from a rotating start) among the partitions
// with due tasks, so that one tenant's backlog cannot starve the others;
// a partition that needs less than its share leaves the rest to others.
// With p.IDs, the earliest due of the IDs are taken.
//
// A TaskClaim spanning several partitions runs one script per partition;
// if only some of them fail, it returns the tasks the others claimed.
func (s *Store) TaskClaim(ctx context.Context, p store.ClaimParams) ([]*store.Task, error) {
	if err := s.open("claim"); err != nil {
		return nil, err
	}
	limit := p.ClaimLimit()
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	nowMs, until := epochms.Of(now), epochms.Of(now.Add(p.Lease))
	var got []claimed
	var err error
	if len(p.IDs) > 0 {
		got, err = s.claimIDs(ctx, p.IDs, nowMs, until, limit)
	} else {
		got, err = s.claimDue(ctx, nowMs, until, limit)
	}
	if err != nil {
		return nil, s.fail("claim", err)
	}
	slices.SortStableFunc(got, func(a, b claimed) int { return cmp.Compare(a.due, b.due) })
	out := make([]*store.Task, len(got))
	for i, c := range got {
		out[i] = c.t
	}
	if p.Later != nil && len(got) < len(p.IDs) {
		if err := s.unclaimed(ctx, p.Unclaimed(out), p.Later); err != nil {
			return nil, s.fail("claim", err)
		}
	}
	return out, nil
}

// unclaimed tells later when each live task of ids in the partitions this
// store claims from is due.
func (s *Store) unclaimed(ctx context.Context, ids []string, later func(store.Due)) error {
	locs, err := s.locate(ctx, ids)
	if err != nil {
		return err
	}
	groups := map[int][]string{}
	for _, id := range ids {
		if l, ok := locs[id]; ok && s.claims(l.part) {
			groups[l.part] = append(groups[l.part], id)
		}
	}
	var due []store.Due
	if err := s.dueOf(ctx, groups, func(d store.Due) { due = append(due, d) }); err != nil {
		return err
	}
	for _, d := range due {
		later(d)
	}
	return nil
}

// claimDue claims the due tasks the partitions' sets hold.
func (s *Store) claimDue(ctx context.Context, now, until int64, limit int) ([]claimed, error) {
	var out []claimed
	for range claimRounds {
		want := limit - len(out)
		queues, err := s.peek(ctx, now, want)
		if err != nil {
			return out, keep(out, err)
		}
		groups, n := s.fairShare(queues, want)
		if n == 0 {
			break
		}
		got, err := s.claimIn(ctx, groups, now, until, want)
		out = append(out, got...)
		if err != nil || len(got) == n || len(out) == limit {
			return out, keep(out, err)
		}
	}
	return out, nil
}

// keep drops err when some tasks were claimed: they must reach the caller,
// and the failed part claimed nothing it knows of.
func keep(out []claimed, err error) error {
	if len(out) > 0 {
		return nil
	}
	return err
}

// candidate is a due task of a partition: PENDING, or IN_FLIGHT with an
// expired lease (due at its lease's end).
type candidate struct {
	id  string
	due int64
}

// peek returns, for each partition the store claims from, up to want of
// its due tasks, earliest first.
func (s *Store) peek(ctx context.Context, now int64, want int) ([][]candidate, error) {
	by := &goredis.ZRangeBy{Min: "-inf", Max: itoa(now), Count: int64(want)}
	pipe := s.rdb.Pipeline()
	cmds := make([][2]*goredis.ZSliceCmd, len(s.claim))
	for i, p := range s.claim {
		cmds[i] = [2]*goredis.ZSliceCmd{
			pipe.ZRangeByScoreWithScores(ctx, s.k.due(p), by),
			pipe.ZRangeByScoreWithScores(ctx, s.k.lease(p), by),
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	queues := make([][]candidate, len(s.claim))
	for i, c := range cmds {
		var q []candidate
		for _, cmd := range c {
			for _, z := range cmd.Val() {
				q = append(q, candidate{id: z.Member.(string), due: int64(z.Score)})
			}
		}
		slices.SortStableFunc(q, func(a, b candidate) int { return cmp.Compare(a.due, b.due) })
		queues[i] = q[:min(len(q), want)]
	}
	return queues, nil
}

// fairShare picks up to want candidates, one from each partition's queue in
// turn, and returns them by partition and their number.
func (s *Store) fairShare(queues [][]candidate, want int) (map[int][]string, int) {
	start := int(s.turn.Add(1) % uint64(len(queues)))
	heads := make([]int, len(queues))
	groups := map[int][]string{}
	n := 0
	for progress := true; progress && n < want; {
		progress = false
		for i := range queues {
			q := (start + i) % len(queues)
			if heads[q] < len(queues[q]) && n < want {
				groups[s.claim[q]] = append(groups[s.claim[q]], queues[q][heads[q]].id)
				heads[q]++
				n++
				progress = true
			}
		}
	}
	return groups, n
}

// claimIDs claims the due tasks among ids.
func (s *Store) claimIDs(ctx context.Context, ids []string, now, until int64, limit int) ([]claimed, error) {
	locs, err := s.locate(ctx, ids)
	if err != nil {
		return nil, err
	}
	groups := map[int][]string{}
	seen := make(map[string]bool, len(ids))
	total := 0
	for _, id := range ids {
		l, ok := locs[id]
		if !ok || seen[id] || !s.claims(l.part) {
			continue
		}
		seen[id] = true
		groups[l.part] = append(groups[l.part], id)
		total++
	}
	if total == 0 {
		return nil, nil
	}
	if limit < total && len(groups) > 1 {
		if groups, err = s.earliest(ctx, groups, now, limit); err != nil {
			return nil, err
		}
	}
	return s.claimIn(ctx, groups, now, until, limit)
}

// earliest keeps the limit tasks of groups that are due first.
func (s *Store) earliest(ctx context.Context, groups map[int][]string, now int64, limit int) (map[int][]string, error) {
	type scored struct {
		part int
		candidate
	}
	pipe := s.rdb.Pipeline()
	cmds := map[int][2]*goredis.FloatSliceCmd{}
	for p, ids := range groups {
		cmds[p] = [2]*goredis.FloatSliceCmd{pipe.ZMScore(ctx, s.k.due(p), ids...), pipe.ZMScore(ctx, s.k.lease(p), ids...)}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var due []scored
	for p, ids := range groups {
		pending, leased := cmds[p][0].Val(), cmds[p][1].Val()
		for i, id := range ids {
			// A missing member reads as 0, which no task's time is.
			at := int64(max(pending[i], leased[i]))
			if at > 0 && at <= now {
				due = append(due, scored{p, candidate{id, at}})
			}
		}
	}
	slices.SortStableFunc(due, func(a, b scored) int { return cmp.Compare(a.due, b.due) })
	out := map[int][]string{}
	for _, c := range due[:min(len(due), limit)] {
		out[c.part] = append(out[c.part], c.id)
	}
	return out, nil
}

// claimIn runs the claim script in each partition of groups, for up to
// limit of its candidates each.
func (s *Store) claimIn(ctx context.Context, groups map[int][]string, now, until int64, limit int) ([]claimed, error) {
	holder := s.holder()
	calls := make([]*call, 0, len(groups))
	for p, ids := range groups {
		keys := make([]string, 5, 5+2*len(ids))
		keys[0], keys[1], keys[2], keys[3], keys[4] = s.k.due(p), s.k.lease(p), s.k.counts(p), s.k.tenantCounts(p), s.k.held(p)
		args := make([]any, 6, 6+len(ids))
		args[0], args[1], args[2], args[3], args[4], args[5] = now, until, limit, s.logCap, store.LeaseExpiredMessage, holder
		for _, id := range ids {
			keys = append(keys, s.k.task(p, id), s.k.log(p, id))
			args = append(args, id)
		}
		calls = append(calls, &call{sc: s.sc.claim, keys: keys, args: args})
	}
	s.eval(ctx, calls...)
	var out []claimed
	var firstErr error
	for _, c := range calls {
		res, err := c.cmd.Slice()
		if err == nil {
			out, err = s.decodeClaimed(out, res)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, c := range out {
		c.t.Holder = holder
	}
	return out, keep(out, firstErr)
}

func (s *Store) decodeClaimed(out []claimed, res []any) ([]claimed, error) {
	for _, r := range res {
		pair, _ := r.([]any)
		if len(pair) != 2 {
			return out, fmt.Errorf("claim reply: %w", errCorrupt)
		}
		due, _ := pair[0].(int64)
		fields, _ := pair[1].([]any)
		t, err := decodeTask(fields)
		if err != nil {
			return out, err
		}
		s.locs.put(t.ID, loc{part: s.Partition(t.Tenant, t.PolicyID), tenant: t.Tenant, policy: t.PolicyID})
		out = append(out, claimed{due: due, t: t})
	}
	return out, nil
}
