package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

var benchStart = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// seed creates n due tasks, in batches of concurrent creates, and returns
// their IDs.
func seed(b *testing.B, s *sqlite.Store, n int) []string {
	b.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				t, _, err := s.TaskCreate(context.Background(), &store.Task{
					Tenant: "bench", IdempotencyKey: fmt.Sprint("k", i), TargetURL: "http://127.0.0.1:9/hook",
					Method: "POST", Headers: map[string]string{"Content-Type": "application/json"},
					Body: []byte(`{"order":12345,"amount":"9.99"}`), PolicyID: "p", CreatedAt: benchStart,
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
// process's CPU time, which other load on the machine disturbs less.
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

// outcome is the Finish of a claimed task whose attempt failed and will be
// retried at once, so that the same tasks go round and round.
func outcome(c *store.Task, now time.Time) store.Finish {
	return store.Finish{
		TaskID: c.ID, Version: c.Version, Status: store.Pending, NextAttemptAt: now, PrevDelay: time.Millisecond,
		LastError: "status 503", LastStatus: 503, Now: now,
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, Duration: time.Millisecond,
			ResponseStatus: 503, ErrorMessage: "status 503", ResponseBody: "try later"},
	}
}

// BenchmarkClaimFinish claims a batch of due tasks and finishes them with
// one TaskFinish call, as a scheduler that batches both does: two durable
// transactions per batch. The "ids" runs name the tasks to claim, as a
// scheduler that keeps due tasks in memory does; "omit" ones also skip
// reading the requests, as it does when it kept them from the last claim.
func BenchmarkClaimFinish(b *testing.B) {
	for _, c := range []struct {
		batch     int
		ids, omit bool
	}{{1, false, false}, {64, false, false}, {256, false, false}, {64, true, false}, {256, true, false}, {64, true, true}} {
		name := fmt.Sprint("batch=", c.batch)
		if c.ids {
			name += ",ids"
		}
		if c.omit {
			name += ",omit"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := open(b)
			defer s.Close()
			queue := seed(b, s, max(4*c.batch, 1024))
			ctx := context.Background()
			now := benchStart
			done := 0
			m := startMeter(b)
			for done < b.N {
				now = now.Add(time.Millisecond)
				p := store.ClaimParams{Now: now, Lease: time.Minute, Limit: min(c.batch, b.N-done), OmitRequest: c.omit}
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

// BenchmarkClaimFinishWorkers claims batches of 256 and has 64 workers
// finish the tasks one TaskFinish call each, as a dispatcher whose workers
// report their own results does: group commit merges their calls.
func BenchmarkClaimFinishWorkers(b *testing.B) {
	s, _ := open(b)
	defer s.Close()
	seed(b, s, 2048)
	ctx := context.Background()
	work := make(chan *store.Task, 512)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for c := range work {
				if errs, err := s.TaskFinish(ctx, []store.Finish{outcome(c, c.LeaseUntil.Add(-time.Minute))}); err != nil || errs[0] != nil {
					b.Errorf("TaskFinish = %v, %v", errs, err)
				}
			}
		})
	}
	m := startMeter(b)
	now := benchStart
	for done := 0; done < b.N; {
		now = now.Add(time.Millisecond)
		claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: min(256, b.N-done)})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range claimed {
			work <- c
		}
		done += len(claimed)
	}
	close(work)
	wg.Wait()
	m.report(b, b.N)
}

// BenchmarkCreate creates tasks one call at a time (serial: each waits for
// its own commit) and from 64 goroutines at once (group commit).
func BenchmarkCreate(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprint("callers=", par), func(b *testing.B) {
			s, _ := open(b)
			defer s.Close()
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
