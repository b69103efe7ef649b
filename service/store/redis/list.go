package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/targethost"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// listed is a task of a list and its creation sequence.
type listed struct {
	seq int64
	t   *store.Task
}

// listBudget bounds the list index entries one TaskList examines: a
// filter the indexes do not cover (TargetHost, a PolicyID without a
// Tenant, one of PENDING and IN_FLIGHT) is matched task by task, and a
// rare match must not make one call read a whole store. Past it, the page
// ends short, with a token that resumes the walk where it stopped.
const listBudget = 5 * store.MaxPageLimit

// hostChunk is how many entries TaskList reads at a time while matching a
// TargetHost, which it does on the URL alone: matches of a host are
// typically sparse, so fewer, larger reads walk faster.
const hostChunk = 256

// TaskList lists tasks newest first; see store.Store. It merges the list
// indexes of every partition (of one, when both Tenant and PolicyID are
// given) in the states the filter names, matching the rest of the filter
// task by task, within listBudget entries a call; the page token is the
// creation sequence of the last task on the page, or of the last entry
// examined when the budget ran out. An IdempotencyKey is looked up in the
// record that deduplicates creates, which names its one task.
func (s *Store) TaskList(ctx context.Context, f store.TaskFilter, page store.Page) ([]*store.Task, string, error) {
	if err := s.open("list tasks"); err != nil {
		return nil, "", err
	}
	if f.IdempotencyKey != "" && f.Tenant == "" {
		return nil, "", fmt.Errorf("redis: list tasks: an idempotency key without a tenant: %w", store.ErrInvalid)
	}
	cursor := "+inf"
	var after int64 // the token's sequence; 0 for the first page
	if page.Token != "" {
		seq, err := pagetoken.DecodeInt("task", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("redis: list tasks: %w", err)
		}
		cursor, after = "("+itoa(seq), seq
	}
	states := taskstate.All()
	if len(f.Statuses) > 0 {
		states = nil
		for _, st := range f.Statuses {
			if !taskstate.Known(st) {
				return nil, "", fmt.Errorf("redis: list tasks: status %q: %w", st, store.ErrInvalid)
			}
			if state := taskstate.Of(st); !slices.Contains(states, state) {
				states = append(states, state)
			}
		}
	}
	if f.IdempotencyKey != "" {
		items, err := s.listByKey(ctx, f, after)
		return items, "", s.fail("list tasks", err)
	}
	sources := s.sources(f, states)
	limit := store.PageLimit(page.Limit)
	var out []listed
	examined, stopped := 0, int64(0)
	for len(out) <= limit {
		if examined >= listBudget {
			// The budget is spent: the page ends here, and the next one
			// resumes after the last entry examined.
			return pageOf(out), pagetoken.EncodeInt("task", stopped), nil
		}
		want := limit + 1 - len(out)
		if f.TargetHost != "" {
			want = max(want, hostChunk)
		}
		want = min(want, listBudget-examined)
		cands, exhausted, err := s.listCandidates(ctx, sources, cursor, want)
		if err != nil {
			return nil, "", s.fail("list tasks", err)
		}
		if len(cands) == 0 {
			break
		}
		examined, stopped = examined+len(cands), cands[len(cands)-1].seq
		if f.TargetHost != "" {
			// Only the tasks of the host are read whole.
			if cands, err = s.ofHost(ctx, cands, f.TargetHost); err != nil {
				return nil, "", s.fail("list tasks", err)
			}
		}
		tasks, err := s.load(ctx, cands)
		if err != nil {
			return nil, "", s.fail("list tasks", err)
		}
		for i, t := range tasks {
			if t != nil && matches(t, f) {
				out = append(out, listed{seq: cands[i].seq, t: t})
			}
		}
		cursor = "(" + itoa(stopped)
		if exhausted {
			break
		}
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = pagetoken.EncodeInt("task", out[limit-1].seq)
	}
	return pageOf(out), next, nil
}

// pageOf returns the tasks of out.
func pageOf(out []listed) []*store.Task {
	items := make([]*store.Task, len(out))
	for i, l := range out {
		items[i] = l.t
	}
	return items
}

// ofHost returns the entries of cands whose task's target URL has host,
// reading only the URLs.
func (s *Store) ofHost(ctx context.Context, cands []entry, host string) ([]entry, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(cands))
	for i, e := range cands {
		cmds[i] = pipe.HMGet(ctx, s.k.task(e.part, e.id), "url")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []entry
	for i, cmd := range cmds {
		if u, ok := cmd.Val()[0].(string); ok && targethost.Matches(u, host) {
			out = append(out, cands[i])
		}
	}
	return out, nil
}

// listByKey lists the task f.IdempotencyKey names for f.Tenant, if it
// matches the rest of f and comes after the page token's sequence (when
// after is not 0): a list of one task at most, so of one page.
func (s *Store) listByKey(ctx context.Context, f store.TaskFilter, after int64) ([]*store.Task, error) {
	rec, err := s.rdb.Get(ctx, s.k.idem(f.Tenant, f.IdempotencyKey)).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fields, err := unpack(rec)
	if err != nil || len(fields) != 3 {
		return nil, errCorrupt
	}
	l, err := decodeLoc(fields[2])
	if err != nil || l.part >= s.parts {
		return nil, errCorrupt
	}
	m, err := s.rdb.HGetAll(ctx, s.k.task(l.part, fields[0])).Result()
	if err != nil || len(m) == 0 {
		return nil, err // a reservation whose create was cut short has no task yet
	}
	t, err := decodeTask(flatten(m))
	if err != nil {
		return nil, err
	}
	seq, err := strconv.ParseInt(m["seq"], 10, 64)
	if err != nil {
		return nil, errCorrupt
	}
	if t.Tenant != f.Tenant || t.IdempotencyKey != f.IdempotencyKey || (after > 0 && seq >= after) || !matches(t, f) {
		return nil, nil
	}
	return []*store.Task{t}, nil
}

// matches applies what the indexes do not: a status among those of one
// state, a policy across tenants, a status that changed since, and the
// target's host.
func matches(t *store.Task, f store.TaskFilter) bool {
	if f.PolicyID != "" && t.PolicyID != f.PolicyID {
		return false
	}
	if f.TargetHost != "" && !targethost.Matches(t.TargetURL, f.TargetHost) {
		return false
	}
	return len(f.Statuses) == 0 || slices.Contains(f.Statuses, t.Status)
}

// sources returns the list indexes TaskList reads for f, by partition.
func (s *Store) sources(f store.TaskFilter, states []string) map[int][]string {
	scope := scopeAll
	switch {
	case f.Tenant != "" && f.PolicyID != "":
		scope = scopePolicy
	case f.Tenant != "":
		scope = scopeTenant
	}
	out := map[int][]string{}
	for p := range s.parts {
		if scope == scopePolicy && p != s.Partition(f.Tenant, f.PolicyID) {
			continue
		}
		for _, state := range states {
			out[p] = append(out[p], s.k.index(p, state, scope, f.Tenant, f.PolicyID))
		}
	}
	return out
}

// entry is a task of a list index: its partition, ID and creation sequence.
type entry struct {
	part int
	id   string
	seq  int64
}

// listCandidates returns the want newest entries of sources below cursor,
// newest first, and whether the sources hold no more.
func (s *Store) listCandidates(ctx context.Context, sources map[int][]string, cursor string, want int) ([]entry, bool, error) {
	calls := make([]*call, 0, len(sources))
	parts := make([]int, 0, len(sources))
	for p, keys := range sources {
		calls = append(calls, &call{sc: s.sc.list, keys: keys, args: []any{cursor, want}})
		parts = append(parts, p)
	}
	s.eval(ctx, calls...)
	var all []entry
	for i, c := range calls {
		res, err := c.cmd.Slice()
		if err != nil {
			return nil, false, err
		}
		for _, r := range res {
			flat, _ := r.([]any)
			for j := 0; j+1 < len(flat); j += 2 {
				id, _ := flat[j].(string)
				score, _ := flat[j+1].(string)
				seq, err := strconv.ParseInt(score, 10, 64)
				if err != nil {
					return nil, false, errCorrupt
				}
				all = append(all, entry{part: parts[i], id: id, seq: seq})
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(b.seq, a.seq) })
	return all[:min(len(all), want)], len(all) < want, nil
}

// load reads the tasks of entries; a task that is gone is nil.
func (s *Store) load(ctx context.Context, entries []entry) ([]*store.Task, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, len(entries))
	for i, e := range entries {
		cmds[i] = pipe.HGetAll(ctx, s.k.task(e.part, e.id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]*store.Task, len(entries))
	for i, cmd := range cmds {
		if m := cmd.Val(); len(m) > 0 {
			t, err := decodeTask(flatten(m))
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
	}
	return out, nil
}

// TaskCounts sums the per-partition counts every script keeps in step.
func (s *Store) TaskCounts(ctx context.Context) (map[store.Status]int64, error) {
	if err := s.open("task counts"); err != nil {
		return nil, err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, s.parts)
	for p := range s.parts {
		cmds[p] = pipe.HGetAll(ctx, s.k.counts(p))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.fail("task counts", err)
	}
	out := store.ZeroCounts()
	for _, cmd := range cmds {
		for st, v := range cmd.Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, s.fail("task counts", errCorrupt)
			}
			out[store.Status(st)] += n
		}
	}
	return out, nil
}
