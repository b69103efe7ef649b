package storetest

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// BenchStart is the creation time of the tasks Seed makes: far enough in the
// past that they are all due.
var BenchStart = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// Seed creates n due tasks of tenant "bench" from workers goroutines, spread
// over policies policies (p0, p1, …), and returns their IDs in creation
// index order. It is the common setup of the stores' benchmarks.
func Seed(tb testing.TB, s store.Store, n, workers, policies int) []string {
	tb.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				t, _, err := s.TaskCreate(context.Background(), &store.Task{
					Tenant: "bench", IdempotencyKey: fmt.Sprint("k", i), TargetURL: "http://127.0.0.1:9/hook",
					Method: "POST", Headers: map[string]string{"Content-Type": "application/json"},
					Body: []byte(`{"order":12345,"amount":"9.99"}`), PolicyID: fmt.Sprint("p", i%policies),
					CreatedAt: BenchStart,
				})
				if err != nil {
					tb.Error(err)
					return
				}
				ids[i] = t.ID
			}
		})
	}
	wg.Wait()
	return ids
}

// RetryAtOnce is the Finish of a claimed task whose attempt failed with a
// 503 and is retried at once, so that a benchmark's tasks go round and round.
func RetryAtOnce(c *store.Task, now time.Time) store.Finish {
	return store.Finish{
		TaskID: c.ID, Version: c.Version, Status: store.Pending, NextAttemptAt: now, PrevDelay: time.Millisecond,
		LastError: "status 503", LastStatus: 503, Now: now,
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, Duration: time.Millisecond,
			ResponseStatus: 503, ErrorMessage: "status 503", ResponseBody: "try later"},
	}
}

// Meter measures a benchmark's rate in wall time and its cost in the
// process's CPU time, which other load on a shared machine disturbs less.
type Meter struct {
	wall time.Time
	cpu  time.Duration
}

// StartMeter resets b's timer and starts measuring.
func StartMeter(b *testing.B) Meter {
	b.ResetTimer()
	return Meter{time.Now(), cpuTime()}
}

// Report reports tasks/s and CPU µs per task since StartMeter.
func (m Meter) Report(b *testing.B, tasks int) {
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

// BenchCreate creates b.N tasks in a store newStore makes for each count of
// callers: one call at a time shows a commit's cost, many at once the
// store's group commit.
func BenchCreate(b *testing.B, newStore func(*testing.B) store.Store, callers ...int) {
	for _, par := range callers {
		b.Run(fmt.Sprint("callers=", par), func(b *testing.B) {
			s := newStore(b)
			ctx := context.Background()
			var mu sync.Mutex
			next := 0
			m := StartMeter(b)
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
			m.Report(b, b.N)
		})
	}
}
