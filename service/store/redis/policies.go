package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// Policies live per tenant, in two keys sharing the tenant's hash tag: a
// hash of records (creation time and spec) and a sorted set of IDs, all
// scored 0 so that it pages by ID.

// PolicyPut registers a policy; see store.Store.
func (s *Store) PolicyPut(ctx context.Context, in *store.Policy) (*store.Policy, bool, error) {
	if err := s.open("put policy"); err != nil {
		return nil, false, err
	}
	p, err := prep.Policy(in)
	if err != nil {
		return nil, false, fmt.Errorf("redis: put policy: %w", err)
	}
	c := &call{sc: s.sc.policy, keys: []string{s.k.policies(p.Tenant), s.k.policyIDs(p.Tenant)},
		args: []any{p.ID, pack(itoa(epochms.Of(p.CreatedAt)), string(p.Spec))}}
	s.eval(ctx, c)
	cur, err := c.cmd.Text()
	if errors.Is(err, goredis.Nil) {
		return p, true, nil
	}
	if err != nil {
		return nil, false, s.fail("put policy", err)
	}
	stored, err := decodePolicy(p.Tenant, p.ID, cur)
	if err != nil {
		return nil, false, s.fail("put policy", err)
	}
	if !bytes.Equal(stored.Spec, p.Spec) {
		return nil, false, fmt.Errorf("redis: policy %s is registered with another spec: %w", p.ID, store.ErrConflict)
	}
	return stored, false, nil
}

func decodePolicy(tenant, id, record string) (*store.Policy, error) {
	f, err := unpack(record)
	if err != nil || len(f) != 2 {
		return nil, errCorrupt
	}
	at, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return nil, errCorrupt
	}
	return &store.Policy{Tenant: tenant, ID: id, Spec: []byte(f[1]), CreatedAt: epochms.Time(at)}, nil
}

// PolicyGet returns one policy of tenant.
func (s *Store) PolicyGet(ctx context.Context, tenant, id string) (*store.Policy, error) {
	if err := s.open("get policy"); err != nil {
		return nil, err
	}
	record, err := s.rdb.HGet(ctx, s.k.policies(tenant), id).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: policy %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail("get policy", err)
	}
	p, err := decodePolicy(tenant, id, record)
	return p, s.fail("get policy", err)
}

// PolicyList lists tenant's policies by ID; the page token is the last ID.
func (s *Store) PolicyList(ctx context.Context, tenant string, page store.Page) ([]*store.Policy, string, error) {
	if err := s.open("list policies"); err != nil {
		return nil, "", err
	}
	from := "-"
	if page.Token != "" {
		after, err := pagetoken.Decode("policy", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("redis: list policies: %w", err)
		}
		from = "(" + after
	}
	limit := store.PageLimit(page.Limit)
	ids, err := s.rdb.ZRangeByLex(ctx, s.k.policyIDs(tenant), &goredis.ZRangeBy{Min: from, Max: "+", Count: int64(limit + 1)}).Result()
	if err != nil {
		return nil, "", s.fail("list policies", err)
	}
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = pagetoken.Encode("policy", ids[limit-1])
	}
	if len(ids) == 0 {
		return nil, "", nil
	}
	records, err := s.rdb.HMGet(ctx, s.k.policies(tenant), ids...).Result()
	if err != nil {
		return nil, "", s.fail("list policies", err)
	}
	items := make([]*store.Policy, 0, len(ids))
	for i, r := range records {
		record, _ := r.(string) // the script writes both keys at once: a listed ID has a record
		p, err := decodePolicy(tenant, ids[i], record)
		if err != nil {
			return nil, "", s.fail("list policies", err)
		}
		items = append(items, p)
	}
	return items, next, nil
}
