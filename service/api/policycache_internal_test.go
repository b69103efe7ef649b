package api

import (
	"fmt"
	"sync"
	"testing"
)

func TestPolicyCacheBound(t *testing.T) {
	t.Parallel()
	c := newPolicyCache(10)
	hot := policyKey{"t", "hot"}
	c.add(hot)
	for i := range 1000 {
		c.add(policyKey{"t", fmt.Sprint(i)})
		if n := c.len(); n > 10 {
			t.Fatalf("after %d adds the cache holds %d, over its bound of 10", i+1, n)
		}
		// A policy in use is kept through every turnover.
		if !c.has(hot) {
			t.Fatalf("the policy in use was forgotten after %d other adds", i+1)
		}
	}
	if c.has(policyKey{"t", "0"}) {
		t.Error("the first of 1,000 policies added once is still held by a cache of 10")
	}
	if !c.has(policyKey{"t", "999"}) {
		t.Error("the last policy added is not held")
	}
	if c.has(policyKey{"u", "hot"}) {
		t.Error("another tenant's policy of the same ID is held")
	}
}

func TestPolicyCacheSizes(t *testing.T) {
	t.Parallel()
	if c := newPolicyCache(-1); c != nil || c.has(policyKey{"t", "p"}) || c.len() != 0 {
		t.Error("a negative size does not turn the cache off")
	}
	var off *policyCache
	off.add(policyKey{"t", "p"}) // a nil cache takes adds and holds nothing
	if off.has(policyKey{"t", "p"}) {
		t.Error("a nil cache holds an entry")
	}
	if c := newPolicyCache(0); c.gen*2 != DefaultPolicyCacheSize {
		t.Errorf("size 0 holds %d, want DefaultPolicyCacheSize %d", c.gen*2, DefaultPolicyCacheSize)
	}
	c := newPolicyCache(1)
	c.add(policyKey{"t", "a"})
	c.add(policyKey{"t", "b"})
	if !c.has(policyKey{"t", "b"}) || c.len() > 2 {
		t.Errorf("a cache of 1 holds %d and has b %v", c.len(), c.has(policyKey{"t", "b"}))
	}
}

// Run with -race: concurrent creates share the cache.
func TestPolicyCacheConcurrent(t *testing.T) {
	t.Parallel()
	c := newPolicyCache(64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := policyKey{fmt.Sprint("tenant", g%2), fmt.Sprint(i % 100)}
				if !c.has(k) {
					c.add(k)
				}
			}
		})
	}
	wg.Wait()
	if n := c.len(); n > 64 {
		t.Errorf("the cache holds %d, over its bound of 64", n)
	}
}
