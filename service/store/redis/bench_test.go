package redis_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
)

// The benchmarks run against the shared server (RETRYKIT_REDIS_URL), each
// under a prefix of its own. They measure the client's side and the
// round trips; Redis's own CPU time is not counted in cpu-µs/task.

var benchStart = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

func benchStore(b *testing.B) *redis.Store {
	url := sharedURL(b)
	return closeAtEnd(b, open(b, url, newPrefix(b, url)))
}

// seed creates n due tasks, from 32 goroutines, spread over policies
// policies (and so over up to that many partitions), and returns their IDs.
func seed(b *testing.B, s *redis.Store, n, policies int) []string {
	b.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				t, _, err := s.TaskCreate(context.Background(), &store.Task{
					Tenant: "bench", IdempotencyKey: fmt.Sprint("k", i), TargetURL: "http://127.0.0.1:9/hook",
					Method: "POST", Headers: map[string]string{"Content-Type": "application/json"},
					Body: []byte(`{"order":12345,"amount":"9.99"}`), PolicyID: fmt.Sprint("p", i%policies),
					CreatedAt: benchStart,
				})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = t.ID
			}
		})
	}
	wg.Wait()
	return ids
}

// meter measures a benchmark's rate in wall time and its cost in the
// process's CPU time.
type meter struct {
	wall time.Time
	cpu  time.Duration
}

func startMeter(b *testing.B) meter {
	b.ResetTimer()
	return meter{time.Now(), cpuTime()}
}

func (m meter) report(b *testing.B, tasks int) {
	b.ReportMetric(float64(tasks)/time.Since(m.wall).Seconds(), "tasks/s")
	b.ReportMetric(float64((cpuTime()-m.cpu).Microseconds())/float64(tasks), "cpu-µs/task")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// outcome is a Finish that retries the task at once, so that the same
// tasks go round and round.
func outcome(c *store.Task, now time.Time) store.Finish {
	return store.Finish{
		TaskID: c.ID, Version: c.Version, Status: store.Pending, NextAttemptAt: now, PrevDelay: time.Millisecond,
		LastError: "status 503", LastStatus: 503, Now: now,
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, Duration: time.Millisecond,
			ResponseStatus: 503, ErrorMessage: "status 503", ResponseBody: "try later"},
	}
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
			queue := seed(b, s, max(4*c.batch, 1024), c.policies)
			ctx := context.Background()
			now := benchStart
			done := 0
			m := startMeter(b)
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
					fs[i] = outcome(c, now)
				}
				if errs, err := s.TaskFinish(ctx, fs); err != nil || errs[0] != nil {
					b.Fatalf("TaskFinish = %v, %v", errs, err)
				}
				done += len(claimed)
			}
			m.report(b, done)
		})
	}
}

// BenchmarkCreate creates tasks one call at a time and from 64 goroutines
// at once.
func BenchmarkCreate(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprint("callers=", par), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			var mu sync.Mutex
			next := 0
			m := startMeter(b)
			var wg sync.WaitGroup
			for range par {
				wg.Go(func() {
					for {
						mu.Lock()
						i := next
						next++
						mu.Unlock()
						if i >= b.N {
							return
						}
						_, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "bench", IdempotencyKey: fmt.Sprint("k", i),
							TargetURL: "http://127.0.0.1:9/hook", Method: "POST", Body: []byte(`{"n":1}`), PolicyID: "p"})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			m.report(b, b.N)
		})
	}
}
