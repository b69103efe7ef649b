package redis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
	"github.com/retrykit/retry/service/store/storetest"
)

// The benchmarks run against the shared server (RETRYKIT_REDIS_URL), each
// under a prefix of its own. They measure the client's side and the
// round trips; Redis's own CPU time is not counted in cpu-µs/task.

func benchStore(b *testing.B) *redis.Store {
	url := redistest.URL(b)
	return closeAtEnd(b, open(b, url, redistest.Prefix(b, url)))
}

// BenchmarkClaimFinish claims a batch of due tasks and finishes them with
// one TaskFinish call: two script runs per batch and partition. "ids"
// names the tasks to claim, as the scheduler does; "spread" has the tasks
// in 16 policies, so that a batch spans most partitions.
func BenchmarkClaimFinish(b *testing.B) {
	for _, c := range []struct {
		batch    int
		ids      bool
		policies int
	}{{1, false, 1}, {64, false, 1}, {256, false, 1}, {64, true, 1}, {256, true, 1}, {256, false, 16}, {256, true, 16}} {
		name := fmt.Sprint("batch=", c.batch)
		if c.ids {
			name += ",ids"
		}
		if c.policies > 1 {
			name += ",spread"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b)
			queue := storetest.Seed(b, s, max(4*c.batch, 1024), 32, c.policies)
			ctx := context.Background()
			now := storetest.BenchStart
			done := 0
			m := storetest.StartMeter(b)
			for done < b.N {
				now = now.Add(time.Millisecond)
				p := store.ClaimParams{Now: now, Lease: time.Minute, Limit: min(c.batch, b.N-done)}
				if c.ids {
					p.IDs, queue = queue[:p.Limit], append(queue[p.Limit:], queue[:p.Limit]...)
				}
				claimed, err := s.TaskClaim(ctx, p)
				if err != nil || len(claimed) != p.Limit {
					b.Fatalf("TaskClaim = %d tasks, %v; want %d", len(claimed), err, p.Limit)
				}
				fs := make([]store.Finish, len(claimed))
				for i, c := range claimed {
					fs[i] = storetest.RetryAtOnce(c, now)
				}
				if errs, err := s.TaskFinish(ctx, fs); err != nil || errs[0] != nil {
					b.Fatalf("TaskFinish = %v, %v", errs, err)
				}
				done += len(claimed)
			}
			m.Report(b, done)
		})
	}
}

// BenchmarkCreate creates tasks one call at a time and from 8 and 16
// goroutines at once, as retryd's API handlers do.
func BenchmarkCreate(b *testing.B) {
	storetest.BenchCreate(b, func(b *testing.B) store.Store { return benchStore(b) }, 1, 8, 16)
}

// BenchmarkCreateBatch creates tasks with TaskCreateBatch, 100 at a time,
// from one goroutine and from 8 at once (retryd's batch endpoint under
// concurrent clients). The tasks are spread over 4 policies, so that a
// batch spans several partitions.
func BenchmarkCreateBatch(b *testing.B) {
	const size = 100
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprint("size=", size, ",callers=", callers), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			var next atomic.Int64
			m := storetest.StartMeter(b)
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for {
						end := int(next.Add(size))
						start := end - size
						if start >= b.N {
							return
						}
						in := make([]*store.Task, min(end, b.N)-start)
						for i := range in {
							in[i] = &store.Task{Tenant: "bench", IdempotencyKey: fmt.Sprint("k", start+i),
								TargetURL: "http://127.0.0.1:9/hook", Method: "POST", Body: []byte(`{"n":1}`),
								PolicyID: fmt.Sprint("p", (start+i)%4)}
						}
						res, err := s.TaskCreateBatch(ctx, in)
						if err != nil {
							b.Error(err)
							return
						}
						for _, r := range res {
							if r.Err != nil || !r.Created {
								b.Errorf("TaskCreateBatch item = %+v, want created", r)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			m.Report(b, b.N)
		})
	}
}
