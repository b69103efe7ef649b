package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// TestCreateFastMatchesReserved: tasks created in one round trip
// (lua/createfast.lua) are stored exactly as tasks created the general
// way, reservations first: every key the two stores hold, with its value,
// is the same but for the prefix and the instance. The batches cover a
// task due later, one created claimed, one with a body, headers and a body
// reference, and a batch of several.
func TestCreateFastMatchesReserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	fastP, slowP := redistest.Prefix(t, url), redistest.Prefix(t, url)
	watch := newSlotChecker(t, false)
	fast := closeAtEnd(t, watch.watch(open(t, url, fastP)))
	slow := closeAtEnd(t, open(t, url, slowP))
	redis.SetOneServer(slow, false)
	holders := map[*redis.Store]string{}
	for _, s := range []*redis.Store{fast, slow} {
		id, err := s.Join(ctx, t0)
		if err != nil {
			t.Fatal(err)
		}
		holders[s] = id
	}

	task := func(key string, due time.Duration) *store.Task {
		return &store.Task{ID: store.NewID(), Tenant: "acme", IdempotencyKey: key, RequestHash: "h-" + key, PolicyID: "p",
			TargetURL: "http://127.0.0.1:9/x", Method: "POST", CreatedAt: t0, NextAttemptAt: t0.Add(due)}
	}
	claimed := task("claimed", 0)
	claimed.LeaseUntil = t0.Add(time.Minute)
	full := task("full", 0)
	full.Body, full.Headers, full.BodyRef, full.BodySize = nil, map[string]string{"X-A": "1"}, "s3://b/k", 42
	several := []*store.Task{task("s1", time.Second), task("s2", 0), task("s3", 2*time.Second)}
	several[1].LeaseUntil = t0.Add(time.Minute)
	for _, batch := range [][]*store.Task{{task("later", time.Second)}, {claimed}, {full}, several} {
		var answers [2]string
		for n, s := range []*redis.Store{fast, slow} {
			in := make([]*store.Task, len(batch))
			for i, t := range batch {
				c := *t
				in[i] = &c
			}
			res, err := s.TaskCreateBatch(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil || !r.Created {
					t.Fatalf("create = %+v, want created", r)
				}
				answers[n] += strings.ReplaceAll(fmt.Sprintf("%+v\n", *r.Task), holders[s], "<holder>")
			}
		}
		if answers[0] != answers[1] {
			t.Fatalf("answers differ:\n fast %s\n slow %s", answers[0], answers[1])
		}
	}
	watch.mu.Lock()
	ran := watch.ran["createfast"]
	watch.mu.Unlock()
	if ran != 4 {
		t.Fatalf("createfast ran %d times, want 4", ran)
	}

	c := redistest.Client(t, url)
	defer c.Close()
	got, want := dump(t, c, fastP, holders[fast]), dump(t, c, slowP, holders[slow])
	for _, k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("only the fast path's store holds %s", k)
		}
	}
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("only the general path's store holds %s", k)
		}
	}
}

// dump is every key under prefix, without it, with its type and value, the
// instance holder written <holder>; sorted.
func dump(t *testing.T, c *goredis.Client, prefix, holder string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		var v any
		var err error
		switch typ := c.Type(ctx, key).Val(); typ {
		case "hash":
			var m map[string]string
			m, err = c.HGetAll(ctx, key).Result()
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range m {
					if !yield(k) {
						return
					}
				}
			})
			kv := make([]string, 0, 2*len(m))
			for _, k := range keys {
				kv = append(kv, k, m[k])
			}
			v = kv
		case "zset":
			v, err = c.ZRangeWithScores(ctx, key, 0, -1).Result()
		case "string":
			v, err = c.Get(ctx, key).Result()
		case "list":
			v, err = c.LRange(ctx, key, 0, -1).Result()
		default:
			v = typ
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.ReplaceAll(fmt.Sprintf("%s = %v", strings.TrimPrefix(key, prefix), v), holder, "<holder>"))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
