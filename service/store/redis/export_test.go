package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// Client returns the store's go-redis client, so that tests can watch the
// commands it sends.
func Client(s *Store) goredis.UniversalClient { return s.rdb }

// WakeChannel returns the wake-up channel of partition p.
func WakeChannel(s *Store, p int) string { return s.k.wake(p) }

// ScriptNames maps the SHA-1 digest of each script to its name.
func ScriptNames(s *Store) map[string]string {
	return map[string]string{
		s.sc.create.Hash(): "create", s.sc.createFast.Hash(): "createfast", s.sc.claim.Hash(): "claim", s.sc.finish.Hash(): "finish",
		s.sc.transition.Hash(): "transition", s.sc.attempts.Hash(): "attempts", s.sc.policy.Hash(): "policy",
		s.sc.release.Hash(): "release", s.sc.list.Hash(): "list", s.sc.purge.Hash(): "purge",
		s.sc.instance.Hash(): "instance", s.sc.bury.Hash(): "bury", s.sc.leases.Hash(): "leases",
		s.sc.destCreate.Hash(): "destcreate", s.sc.destUpdate.Hash(): "destupdate", s.sc.destDelete.Hash(): "destdelete",
		s.sc.limit.Hash(): "limit", s.sc.reseal.Hash(): "reseal",
	}
}

// CreateCutShort runs the first step of TaskCreate only, as a process that
// died between the two would have; t needs its ID and idempotency key.
func CreateCutShort(ctx context.Context, s *Store, t *store.Task) error {
	return CreateBatchCutShort(ctx, s, []*store.Task{t})
}

// CreateBatchCutShort runs the first step of TaskCreateBatch only (the
// reservations), as a process that died between the two would have; the
// tasks need their IDs and idempotency keys.
func CreateBatchCutShort(ctx context.Context, s *Store, ts []*store.Task) error {
	_, err := s.reserve(ctx, s.newTasks(ts, make([]store.CreateResult, len(ts))))
	return err
}

// Pack and Unpack expose the codec to the fuzz test.
var (
	Pack   = pack
	Unpack = unpack
)

// PurgeCutShort runs TaskPurge's deletions without releasing the ID and
// idempotency key records, as a process that died between the two would
// have; it returns how many tasks it deleted.
func PurgeCutShort(ctx context.Context, s *Store, before time.Time) (int, error) {
	if err := s.backfillDone(ctx); err != nil {
		return 0, err
	}
	_, got, err := s.purgeRound(ctx, epochms.Of(before), store.MaxPurgeLimit)
	return len(got), err
}

// ForgetDoneIndex empties the done sets and unmarks them complete, as in a
// store written before they existed.
func ForgetDoneIndex(ctx context.Context, s *Store) error {
	for p := range s.parts {
		if err := s.rdb.Del(ctx, s.k.done(p)).Err(); err != nil {
			return err
		}
	}
	s.doneFilled.Store(false)
	return s.rdb.HDel(ctx, s.k.config(), configDone).Err()
}

// PurgedLeft returns how many entries the purged lists hold.
func PurgedLeft(ctx context.Context, s *Store) (int64, error) {
	var n int64
	for p := range s.parts {
		l, err := s.rdb.LLen(ctx, s.k.purged(p)).Result()
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, nil
}

// ForgetTenantCounts empties the tenant counts and unmarks them complete,
// as in a store written before they existed.
func ForgetTenantCounts(ctx context.Context, s *Store) error {
	for p := range s.parts {
		if err := s.rdb.Del(ctx, s.k.tenantCounts(p)).Err(); err != nil {
			return err
		}
	}
	s.tenantCounted.Store(false)
	return s.rdb.HDel(ctx, s.k.config(), configTenantCounts).Err()
}

// AddTenantCount adds n to tenant's count of status in partition p, as a
// script of an older store would have left it.
func AddTenantCount(ctx context.Context, s *Store, p int, status, tenant string, n int64) error {
	return s.rdb.HIncrBy(ctx, s.k.tenantCounts(p), tenantCountField(status, tenant), n).Err()
}

// SetOneServer turns the one-round-trip create (createFast) on or off, as
// if the server had cluster mode off or on.
func SetOneServer(s *Store, on bool) { s.oneServer.Store(on) }
