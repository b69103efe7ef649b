package redis

import (
	"context"
	"errors"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// locCacheSize bounds each of the location cache's two generations.
const locCacheSize = 1 << 16

// locCache remembers where tasks live. A location never changes once its
// ID is reserved, so an entry is never stale; the cache only forgets.
// Entries live in two generations: when the newer fills up, the older is
// dropped, so recent tasks (the ones being claimed and finished) stay.
type locCache struct {
	mu       sync.Mutex
	cur, old map[string]loc
}

func (c *locCache) get(id string) (loc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.cur[id]; ok {
		return l, true
	}
	l, ok := c.old[id]
	if ok {
		c.putLocked(id, l)
	}
	return l, ok
}

func (c *locCache) put(id string, l loc) {
	c.mu.Lock()
	c.putLocked(id, l)
	c.mu.Unlock()
}

// forget drops the entries of ids: their tasks were purged, and an ID may
// be used again.
func (c *locCache) forget(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.cur, id)
		delete(c.old, id)
	}
}

func (c *locCache) putLocked(id string, l loc) {
	if len(c.cur) >= locCacheSize || c.cur == nil {
		c.old, c.cur = c.cur, make(map[string]loc, min(2*len(c.cur)+16, locCacheSize))
	}
	c.cur[id] = l
}

// locate returns the locations of the tasks ids that exist, from the cache
// or, in one round trip, from their ID records.
func (s *Store) locate(ctx context.Context, ids []string) (map[string]loc, error) {
	out := make(map[string]loc, len(ids))
	var missing []string
	for _, id := range ids {
		if l, ok := s.locs.get(id); ok {
			out[id] = l
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	// One GET each rather than MGET: on a cluster the records live in
	// different slots.
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.StringCmd, len(missing))
	for i, id := range missing {
		cmds[i] = pipe.Get(ctx, s.k.id(id))
	}
	_, _ = pipe.Exec(ctx)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		l, err := decodeLoc(v)
		if err != nil || l.part >= s.parts {
			return nil, errCorrupt
		}
		s.locs.put(missing[i], l)
		out[missing[i]] = l
	}
	return out, nil
}

// locateOne returns the location of task id of tenant; ok is false when
// the tenant has no such task.
func (s *Store) locateOne(ctx context.Context, tenant, id string) (loc, bool, error) {
	m, err := s.locate(ctx, []string{id})
	if err != nil {
		return loc{}, false, err
	}
	l, ok := m[id]
	return l, ok && l.tenant == tenant, nil
}
