package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// listed is a task of a list and its creation sequence.
type listed struct {
	seq int64
	t   *store.Task
}

// TaskList lists tasks newest first; see store.Store. It merges the list
// indexes of every partition (of one, when both Tenant and PolicyID are
// given) in the states the filter names; the page token is the creation
// sequence of the last task on the page.
func (s *Store) TaskList(ctx context.Context, f store.TaskFilter, page store.Page) ([]*store.Task, string, error) {
	if err := s.open("list tasks"); err != nil {
		return nil, "", err
	}
	cursor := "+inf"
	if page.Token != "" {
		seq, err := pagetoken.DecodeInt("task", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("redis: list tasks: %w", err)
		}
		cursor = "(" + itoa(seq)
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
	sources := s.sources(f, states)
	limit := store.PageLimit(page.Limit)
	var out []listed
	for len(out) <= limit {
		want := limit + 1 - len(out)
		cands, exhausted, err := s.listCandidates(ctx, sources, cursor, want)
		if err != nil {
			return nil, "", s.fail("list tasks", err)
		}
		if len(cands) == 0 {
			break
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
		cursor = "(" + itoa(cands[len(cands)-1].seq)
		if exhausted {
			break
		}
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = pagetoken.EncodeInt("task", out[limit-1].seq)
	}
	items := make([]*store.Task, len(out))
	for i, l := range out {
		items[i] = l.t
	}
	return items, next, nil
}

// matches applies what the indexes do not: a status among those of one
// state, a policy across tenants, and a status that changed since.
func matches(t *store.Task, f store.TaskFilter) bool {
	if f.PolicyID != "" && t.PolicyID != f.PolicyID {
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
	out := map[store.Status]int64{
		store.Pending: 0, store.InFlight: 0, store.Succeeded: 0,
		store.Exhausted: 0, store.Failed: 0, store.Cancelled: 0,
	}
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
