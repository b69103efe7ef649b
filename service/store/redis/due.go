package redis

import (
	"context"
	"time"

	"github.com/retrykit/retry/service/store"
)

// TaskDue reports every live task of the partitions this store claims
// from, and when it is next due; see store.Store. The due and lease sets
// hold exactly that, scored by the time: each is read by rank, DueBatch
// members at a time. A member that moves between sets during the walk may
// be reported twice or not at all, as the contract allows.
func (s *Store) TaskDue(ctx context.Context, each func(id string, at time.Time)) error {
	if err := s.open("due tasks"); err != nil {
		return err
	}
	for _, p := range s.claim {
		for _, key := range []string{s.k.due(p), s.k.lease(p)} {
			for start := int64(0); ; start += store.DueBatch {
				zs, err := s.rdb.ZRangeWithScores(ctx, key, start, start+store.DueBatch-1).Result()
				if err != nil {
					return s.fail("due tasks", err)
				}
				for _, z := range zs {
					id, _ := z.Member.(string)
					each(id, time.UnixMilli(int64(z.Score)).UTC())
				}
				if len(zs) < store.DueBatch {
					break
				}
			}
		}
	}
	return nil
}
