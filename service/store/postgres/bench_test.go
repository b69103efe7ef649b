package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/storetest"
)

// claimFinishLoop claims batches of up to batch due tasks from s and
// finishes each batch with one TaskFinish call, until it has done n
// tasks; with ids it names the tasks to claim, taking them from queue.
func claimFinishLoop(b *testing.B, s *postgres.Store, n, batch int, queue []string) {
	ctx := context.Background()
	now := storetest.BenchStart
	for done := 0; done < n; {
		now = now.Add(time.Millisecond)
		p := store.ClaimParams{Now: now, Lease: time.Minute, Limit: min(batch, n-done)}
		if queue != nil {
			p.IDs, queue = queue[:p.Limit], append(queue[p.Limit:], queue[:p.Limit]...)
		}
		claimed, err := s.TaskClaim(ctx, p)
		if err != nil {
			b.Error(err)
			return
		}
		if len(claimed) == 0 {
			continue // another instance holds them
		}
		fs := make([]store.Finish, len(claimed))
		for i, c := range claimed {
			fs[i] = storetest.RetryAtOnce(c, now)
		}
		if errs, err := s.TaskFinish(ctx, fs); err != nil || errs[0] != nil {
			b.Errorf("TaskFinish = %v, %v", errs, err)
			return
		}
		done += len(claimed)
	}
}

// BenchmarkClaimFinish claims a batch of due tasks and finishes them with
// one TaskFinish call, as a scheduler that batches both does: two
// statements, two commits per batch. The "ids" runs name the tasks to
// claim, as a scheduler that keeps due tasks in memory does.
func BenchmarkClaimFinish(b *testing.B) {
	for _, c := range []struct {
		batch int
		ids   bool
	}{{1, false}, {64, false}, {256, false}, {64, true}, {256, true}} {
		name := fmt.Sprint("batch=", c.batch)
		if c.ids {
			name += ",ids"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b, newSchema(b))
			queue := storetest.Seed(b, s, max(4*c.batch, 1024), 16, 1)
			if !c.ids {
				queue = nil
			}
			b.ResetTimer()
			start := time.Now()
			claimFinishLoop(b, s, b.N, c.batch, queue)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}

// BenchmarkClaimFinishInstances runs one and two stores on one schema, as
// retryd instances sharing a database, each claiming and finishing batches
// of 64 from four goroutines: SKIP LOCKED keeps their claims apart.
func BenchmarkClaimFinishInstances(b *testing.B) {
	for _, instances := range []int{1, 2} {
		b.Run(fmt.Sprint("instances=", instances), func(b *testing.B) {
			schema := newSchema(b)
			stores := make([]*postgres.Store, instances)
			for i := range stores {
				stores[i] = open(b, schema)
			}
			storetest.Seed(b, stores[0], 4096, 16, 1)
			const loops = 4
			per := b.N/(instances*loops) + 1
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, s := range stores {
				for range loops {
					wg.Go(func() { claimFinishLoop(b, s, per, 64, nil) })
				}
			}
			wg.Wait()
			b.ReportMetric(float64(per*instances*loops)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}

// BenchmarkListenLag measures when another store's Listen reports a task
// that TaskCreate makes, one create at a time: from the call (p50-ms,
// p99-ms), which includes the commit, and from its return (after-p99-ms),
// which is negative when the report came first: the server notifies
// listeners as it commits, before it answers the writer.
func BenchmarkListenLag(b *testing.B) {
	schema := newSchema(b)
	writer, reader := open(b, schema), open(b, schema)
	heardAt := make(chan time.Time, 1)
	listening := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- reader.Listen(ctx, func(store.Due) { heardAt <- time.Now() }, func() { listening <- struct{}{} })
	}()
	defer func() {
		cancel()
		<-done
	}()
	<-listening
	lags, after := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, _, err := writer.TaskCreate(context.Background(), &store.Task{Tenant: "bench",
			IdempotencyKey: fmt.Sprint("k", i), TargetURL: "http://127.0.0.1:9/", Method: "POST"}); err != nil {
			b.Fatal(err)
		}
		created := time.Now()
		heard := <-heardAt
		lags, after = append(lags, heard.Sub(start)), append(after, heard.Sub(created))
	}
	slices.Sort(lags)
	slices.Sort(after)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
	b.ReportMetric(ms(lags[len(lags)*99/100]), "p99-ms")
	b.ReportMetric(ms(after[len(after)*99/100]), "after-p99-ms")
}
