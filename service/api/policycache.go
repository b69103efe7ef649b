package api

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/retrykit/retry/service/store"
)

// DefaultPolicyCacheSize is how many (tenant, policyId) pairs the server
// remembers as registered when Config.PolicyCacheSize is 0.
const DefaultPolicyCacheSize = 10000

type policyKey struct{ tenant, id string }

// policyCache remembers which (tenant, policyId) pairs name a registered
// policy, so that a create does not read the store to learn it again.
// Caching a positive answer is safe forever because a policy never changes
// or disappears once registered (PolicyPut of another spec is a conflict,
// and there is no delete; a delete would have to clear this cache, on every
// instance sharing the store). Absence is never cached: a policy registered
// a moment later, here or through another instance, must be found at once.
//
// The bound is kept with two generations instead of a recency list: entries
// go into cur, and when cur is full it becomes prev and a new cur starts,
// dropping the old prev. A hit in prev moves the entry to cur, so a policy
// in use survives every turnover and only ones unused for a whole
// generation are forgotten — nearly LRU at the cost of a map lookup.
type policyCache struct {
	mu        sync.Mutex
	gen       int // entries a generation holds; the cache holds at most 2·gen
	cur, prev map[policyKey]struct{}
}

// newPolicyCache returns a cache of at most size entries, or nil (caching
// off) when size is negative.
func newPolicyCache(size int) *policyCache {
	if size < 0 {
		return nil
	}
	if size == 0 {
		size = DefaultPolicyCacheSize
	}
	gen := max(size/2, 1)
	return &policyCache{gen: gen, cur: make(map[policyKey]struct{})}
}

// has reports whether k was recorded (and not forgotten since).
func (c *policyCache) has(k policyKey) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[k]; ok {
		return true
	}
	if _, ok := c.prev[k]; ok {
		delete(c.prev, k)
		c.addLocked(k)
		return true
	}
	return false
}

// add records that k names a registered policy.
func (c *policyCache) add(k policyKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[k]; !ok {
		c.addLocked(k)
	}
}

func (c *policyCache) addLocked(k policyKey) {
	if len(c.cur) >= c.gen {
		c.prev, c.cur = c.cur, make(map[policyKey]struct{}, c.gen)
	}
	c.cur[k] = struct{}{}
}

// len returns the number of entries held, for tests of the bound.
func (c *policyCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}

// policyKnown reports whether a task of the tenant may name policy id: the
// tenant registered it, or it is the built-in "default" (store.LookupPolicy),
// asking the store only when the cache does not know. The answer for
// "default" is cached whichever it is, since it stays true either way. err
// is the store's failure (not ErrNotFound, which is known false).
func (s *server) policyKnown(ctx context.Context, tenant, id string) (bool, error) {
	k := policyKey{tenant, id}
	if s.policies.has(k) {
		return true, nil
	}
	_, _, err := store.LookupPolicy(ctx, s.store, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	s.policies.add(k)
	return true, nil
}

// unknownPolicy is the 400 of a task naming a policy the tenant lacks.
func unknownPolicy(id string) *APIError {
	return errorf(http.StatusBadRequest, CodeUnknownPolicy, "policyId", "no policy %q is registered; POST /retry-policies first", id)
}
