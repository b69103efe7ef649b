package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
)

// AttemptList returns a task's attempt log oldest first. The log keeps the
// latest attempts only (WithAttemptLogCap); the page token is the position
// of the next entry counted from the task's first, so trimming never
// shifts a page.
func (s *Store) AttemptList(ctx context.Context, tenant, taskID string, page store.Page) ([]*store.Attempt, string, error) {
	if err := s.open("list attempts"); err != nil {
		return nil, "", err
	}
	var from int64
	if page.Token != "" {
		n, err := pagetoken.DecodeInt("attempt", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("redis: list attempts: %w", err)
		}
		from = n - 1 // tokens hold position+1: DecodeInt wants a positive key
	}
	l, ok, err := s.locateOne(ctx, tenant, taskID)
	if err != nil {
		return nil, "", s.fail("list attempts", err)
	}
	if !ok {
		return nil, "", fmt.Errorf("redis: task %s: %w", taskID, store.ErrNotFound)
	}
	limit := store.PageLimit(page.Limit)
	c := &call{sc: s.sc.attempts, keys: []string{s.k.task(l.part, taskID), s.k.log(l.part, taskID)},
		args: []any{from, limit + 1}}
	s.eval(ctx, c)
	res, err := c.cmd.Slice()
	if errors.Is(err, goredis.Nil) {
		return nil, "", fmt.Errorf("redis: task %s: %w", taskID, store.ErrNotFound)
	}
	if err != nil {
		return nil, "", s.fail("list attempts", err)
	}
	first, _ := res[0].(int64)
	entries, _ := res[1].([]any)
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		next = pagetoken.EncodeInt("attempt", first+int64(limit)+1)
	}
	items := make([]*store.Attempt, len(entries))
	for i, e := range entries {
		raw, _ := e.(string)
		if items[i], err = decodeAttempt(taskID, raw); err != nil {
			return nil, "", s.fail("list attempts", err)
		}
	}
	return items, next, nil
}
