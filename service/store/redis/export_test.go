package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
)

// Client returns the store's go-redis client, so that tests can watch the
// commands it sends.
func Client(s *Store) goredis.UniversalClient { return s.rdb }

// WakeChannel returns the wake-up channel of partition p.
func WakeChannel(s *Store, p int) string { return s.k.wake(p) }

// ScriptNames maps the SHA-1 digest of each script to its name.
func ScriptNames(s *Store) map[string]string {
	return map[string]string{
		s.sc.create.Hash(): "create", s.sc.claim.Hash(): "claim", s.sc.finish.Hash(): "finish",
		s.sc.transition.Hash(): "transition", s.sc.attempts.Hash(): "attempts", s.sc.policy.Hash(): "policy",
		s.sc.release.Hash(): "release", s.sc.list.Hash(): "list",
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
