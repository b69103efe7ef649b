package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// TaskDue reports every live task of the partitions this store claims
// from, and when it is next due; see store.Store. The due and lease sets
// hold exactly those tasks, scored by the time: each is read by rank,
// DueBatch members at a time, and each batch's times are read again with
// their versions, together (due.lua). A member that moves between sets
// during the walk may be reported twice or not at all, as the contract
// allows.
func (s *Store) TaskDue(ctx context.Context, each func(store.Due)) error {
	if err := s.open("due tasks"); err != nil {
		return err
	}
	for _, p := range s.claim {
		for _, key := range []string{s.k.due(p), s.k.lease(p)} {
			for start := int64(0); ; start += store.DueBatch {
				ids, err := s.rdb.ZRange(ctx, key, start, start+store.DueBatch-1).Result()
				if err == nil {
					err = s.dueOf(ctx, map[int][]string{p: ids}, each)
				}
				if err != nil {
					return s.fail("due tasks", err)
				}
				if len(ids) < store.DueBatch {
					break
				}
			}
		}
	}
	return nil
}

// dueOf calls each with when every live task of groups (IDs by partition)
// is due, with its version, one script per partition in one pipeline.
func (s *Store) dueOf(ctx context.Context, groups map[int][]string, each func(store.Due)) error {
	calls := make([]*call, 0, len(groups))
	for p, ids := range groups {
		if len(ids) == 0 {
			continue
		}
		keys := make([]string, 2, 2+len(ids))
		keys[0], keys[1] = s.k.due(p), s.k.lease(p)
		args := make([]any, len(ids))
		for i, id := range ids {
			keys = append(keys, s.k.task(p, id))
			args[i] = id
		}
		calls = append(calls, &call{sc: s.sc.due, keys: keys, args: args})
	}
	if len(calls) == 0 {
		return nil
	}
	s.eval(ctx, calls...)
	for _, c := range calls {
		res, err := c.cmd.StringSlice()
		if err != nil {
			return err
		}
		if len(res)%3 != 0 {
			return fmt.Errorf("due reply: %w", errCorrupt)
		}
		for i := 0; i < len(res); i += 3 {
			at, err1 := strconv.ParseInt(res[i+1], 10, 64)
			v, err2 := strconv.ParseInt(res[i+2], 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("due reply: %w", errCorrupt)
			}
			each(store.Due{ID: res[i], At: epochms.Time(at), Version: v})
		}
	}
	return nil
}
