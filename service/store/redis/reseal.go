package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// A reseal walks each partition's list indexes of all tenants, every
// state at once, newest first, with the list script (lua/list.lua): a task
// that moves between states meanwhile (a finish, a redrive) keeps its
// creation sequence and is seen in exactly one of them. It reads the
// tenant and headers of each task listed, keeps those whose packed headers
// hold the sealed prefix, and writes the headers change changed with
// resealLua, one call per task in one pipeline.
//
// Destinations have no index across tenants: DestinationEach finds the
// tenants' ID sets with SCAN, on every master of a cluster.

// TaskHeadersReseal seals again the sealed values of tasks' headers; see
// store.TaskHeaderResealer.
func (s *Store) TaskHeadersReseal(ctx context.Context, change store.HeaderChange) (int, error) {
	if err := s.open("reseal task headers"); err != nil {
		return 0, err
	}
	sc := s.sc.reseal
	states := taskstate.All()
	n := 0
	for p := range s.parts {
		keys := make([]string, len(states))
		for i, state := range states {
			keys[i] = s.k.index(p, state, scopeAll, "", "")
		}
		sources := map[int][]string{p: keys}
		cursor := "+inf"
		for {
			cands, exhausted, err := s.listCandidates(ctx, sources, cursor, store.ResealBatch)
			if err != nil {
				return n, s.fail("reseal task headers", err)
			}
			if len(cands) == 0 {
				break
			}
			// The headers change changed before it failed are written
			// all the same: they were sealed again as asked.
			calls, err := s.resealBatch(ctx, sc, cands, change)
			if len(calls) > 0 {
				wrote, werr := s.resealWrite(ctx, calls)
				n += wrote
				if err == nil {
					err = werr
				}
			}
			if err != nil {
				return n, s.fail("reseal task headers", err)
			}
			if exhausted {
				break
			}
			cursor = "(" + itoa(cands[len(cands)-1].seq)
		}
	}
	return n, nil
}

// resealBatch reads the tenant and headers of the tasks of cands, all of
// one partition, calls change with the headers that hold sealed values,
// and returns the script calls that write those it changed.
func (s *Store) resealBatch(ctx context.Context, sc *goredis.Script, cands []entry, change store.HeaderChange) ([]*call, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(cands))
	for i, e := range cands {
		cmds[i] = pipe.HMGet(ctx, s.k.task(e.part, e.id), "tn", "h")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var calls []*call
	for i, cmd := range cmds {
		v := cmd.Val()
		tenant, _ := v[0].(string)
		packed, ok := v[1].(string)
		if !ok || !strings.Contains(packed, store.SealedPrefix) {
			continue // gone since it was listed, or nothing sealed
		}
		h, err := decodeHeaders(packed)
		if err != nil {
			return calls, fmt.Errorf("task %s: %w", cands[i].id, err)
		}
		if !store.HasSealed(h) {
			continue
		}
		next, changed, err := change(tenant, cands[i].id, h)
		if err != nil {
			return calls, err
		}
		if changed {
			calls = append(calls, &call{sc: sc, keys: []string{s.k.task(cands[i].part, cands[i].id)},
				args: []any{packed, encodeHeaders(next)}})
		}
	}
	return calls, nil
}

// resealWrite runs calls and returns how many wrote their task's headers.
func (s *Store) resealWrite(ctx context.Context, calls []*call) (int, error) {
	s.eval(ctx, calls...)
	n := 0
	var errs []error
	for _, c := range calls {
		wrote, err := c.cmd.Int()
		if err != nil {
			errs = append(errs, err)
		}
		n += wrote
	}
	return n, errors.Join(errs...)
}

// DestinationEach calls each with every destination's tenant and ID,
// tenants in the order of their names and each tenant's destinations in
// the order of their IDs; see store.DestinationWalker.
func (s *Store) DestinationEach(ctx context.Context, each func(tenant, id string) error) error {
	if err := s.open("walk destinations"); err != nil {
		return err
	}
	tenants, err := s.destinationTenants(ctx)
	if err != nil {
		return s.fail("walk destinations", err)
	}
	for _, tenant := range tenants {
		key := s.k.destinationIDs(tenant)
		from := "-"
		for {
			ids, err := s.rdb.ZRangeByLex(ctx, key, &goredis.ZRangeBy{Min: from, Max: "+", Count: store.ResealBatch}).Result()
			if err != nil {
				return s.fail("walk destinations", err)
			}
			for _, id := range ids {
				if err := each(tenant, id); err != nil {
					return fmt.Errorf("redis: walk destinations: %w", err)
				}
			}
			if len(ids) < store.ResealBatch {
				break
			}
			from = "(" + ids[len(ids)-1]
		}
	}
	return nil
}

// destinationTenants returns the tenants that have destinations, from the
// names of their ID sets, which SCAN finds: the cost of a walk of every
// key of the server, once.
func (s *Store) destinationTenants(ctx context.Context) ([]string, error) {
	// The tenant's hash tag is {t:<16 hex digits>}; the key's own name
	// then ends in the tenant, which destinationIDs must give back.
	pattern := globEscape(s.k.prefix) + "{t:" + strings.Repeat("?", 16) + "}:dstids:*"
	var mu sync.Mutex
	seen := map[string]bool{}
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		iter := c.ScanType(ctx, 0, pattern, 1000, "zset").Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			_, tenant, ok := strings.Cut(strings.TrimPrefix(key, s.k.prefix), "}:dstids:")
			if !ok || tenant == "" || s.k.destinationIDs(tenant) != key {
				continue // not a name destinationIDs makes, though the pattern matched
			}
			mu.Lock()
			seen[tenant] = true
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := s.rdb.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, err
	}
	tenants := make([]string, 0, len(seen))
	for t := range seen {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	return tenants, nil
}

// globEscape quotes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var (
	_ store.TaskHeaderResealer = (*Store)(nil)
	_ store.DestinationWalker  = (*Store)(nil)
)
