package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// Tenant counts: each partition's tenantCounts hash holds, for every
// tenant with tasks there, its number of tasks in each status, which the
// scripts that write tasks keep in step with the partition's counts. A
// store written before they existed lacks them for its tasks: the first
// TenantCounts of a Store sets them from the list indexes
// (backfillTenantCounts) and marks the store's config so that no later one
// does; a new store is marked when it is made. Instances of an older
// retryd that still write to the store do not keep them: upgrade them all
// before relying on TenantCounts.

// configTenantCounts is the config field saying the tenant counts are
// complete.
const configTenantCounts = "tenant-counts"

// tenantFillBatch is how many tenants one run of the fill script sets.
const tenantFillBatch = 100

// TenantCounts sums tenant's counts in every partition's tenant counts
// hash, which every script keeps in step as it does the partition's
// counts: one HMGET of six fields per partition, in one pipeline, whatever
// the number of tasks.
func (s *Store) TenantCounts(ctx context.Context, tenant string) (map[store.Status]int64, error) {
	if err := s.open("tenant counts"); err != nil {
		return nil, err
	}
	if err := s.backfillTenantCounts(ctx); err != nil {
		return nil, s.fail("tenant counts: fill them in", err)
	}
	statuses := store.Statuses()
	fields := make([]string, len(statuses))
	for i, st := range statuses {
		fields[i] = tenantCountField(string(st), tenant)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, s.parts)
	for p := range s.parts {
		cmds[p] = pipe.HMGet(ctx, s.k.tenantCounts(p), fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.fail("tenant counts", err)
	}
	out := store.ZeroCounts()
	for _, cmd := range cmds {
		for i, v := range cmd.Val() {
			if v == nil { // no task of the tenant ever had that status here
				continue
			}
			str, _ := v.(string)
			n, err := strconv.ParseInt(str, 10, 64)
			if err != nil {
				return nil, s.fail("tenant counts", errCorrupt)
			}
			out[statuses[i]] += n
		}
	}
	return out, nil
}

// backfillTenantCounts sets the tenant counts of every tenant of every
// partition from the list indexes, unless the store's config says they are
// complete; then it says so. The tenants are those of the tasks of the
// partition's list indexes and those the counts already name (a task of
// an older retryd purged since may have left a count below zero); a
// tenant whose first task came after the walk has counts its scripts kept.
// Running twice, or in two instances at once, sets the same counts.
func (s *Store) backfillTenantCounts(ctx context.Context) error {
	if s.tenantCounted.Load() {
		return nil
	}
	v, err := s.rdb.HGet(ctx, s.k.config(), configTenantCounts).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return err
	}
	if v != "1" {
		for p := range s.parts {
			if err := s.fillTenantCounts(ctx, p); err != nil {
				return err
			}
		}
		if err := s.rdb.HSet(ctx, s.k.config(), configTenantCounts, "1").Err(); err != nil {
			return err
		}
	}
	s.tenantCounted.Store(true)
	return nil
}

// fillTenantCounts sets the tenant counts of partition p's tenants.
func (s *Store) fillTenantCounts(ctx context.Context, p int) error {
	tenants := map[string]bool{}
	fields, err := s.rdb.HKeys(ctx, s.k.tenantCounts(p)).Result()
	if err != nil {
		return err
	}
	for _, f := range fields {
		if _, tn, ok := strings.Cut(f, ":"); ok {
			tenants[tn] = true
		}
	}
	for _, state := range taskstate.All() {
		if err := s.tenantsOf(ctx, p, s.k.index(p, state, scopeAll, "", ""), tenants); err != nil {
			return err
		}
	}
	batch := make([]string, 0, tenantFillBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		keys := []string{s.k.tenantCounts(p), s.k.lease(p)}
		args := make([]any, len(batch))
		for i, tn := range batch {
			for _, state := range taskstate.All() { // LIVE first, as the script reads them
				keys = append(keys, s.k.index(p, state, scopeTenant, tn, ""))
			}
			args[i] = tn
		}
		batch = batch[:0]
		return s.sc.tcountsFill.Run(ctx, s.rdb, keys, args...).Err()
	}
	for tn := range tenants {
		if batch = append(batch, tn); len(batch) == tenantFillBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// tenantsOf adds to tenants the tenants of the tasks of list index key of
// partition p, reading store.DueBatch of them at a time.
func (s *Store) tenantsOf(ctx context.Context, p int, key string, tenants map[string]bool) error {
	from := "-inf"
	for {
		zs, err := s.rdb.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{Key: key, Start: from, Stop: "+inf",
			ByScore: true, Count: store.DueBatch}).Result()
		if err != nil || len(zs) == 0 {
			return err
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]*goredis.StringCmd, len(zs))
		for i, z := range zs {
			id, _ := z.Member.(string)
			cmds[i] = pipe.HGet(ctx, s.k.task(p, id), "tn")
		}
		_, _ = pipe.Exec(ctx) // a task gone since answers Nil
		for _, cmd := range cmds {
			if tn, err := cmd.Result(); err == nil {
				tenants[tn] = true
			}
		}
		if len(zs) < store.DueBatch {
			return nil
		}
		from = "(" + strconv.FormatFloat(zs[len(zs)-1].Score, 'f', -1, 64)
	}
}
