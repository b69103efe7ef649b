package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/storetest"
)

// BenchmarkCreate creates tasks one call at a time and from 8 and 16
// goroutines at once, as retryd's API does for concurrent clients.
func BenchmarkCreate(b *testing.B) {
	storetest.BenchCreate(b, func(b *testing.B) store.Store { return open(b, newSchema(b)) }, 1, 8, 16)
}

// benchTask is the task the create benchmarks make, BenchCreate's.
func benchTask(i int64) *store.Task {
	return &store.Task{Tenant: "bench", IdempotencyKey: fmt.Sprint("k", i), TargetURL: "http://127.0.0.1:9/hook",
		Method: "POST", Body: []byte(`{"n":1}`), PolicyID: "p"}
}

// BenchmarkCreateBatch creates tasks with TaskCreateBatch calls of 100,
// from one goroutine and from four at once.
func BenchmarkCreateBatch(b *testing.B) {
	const size = 100
	for _, callers := range []int{1, 4} {
		b.Run(fmt.Sprint("size=100,callers=", callers), func(b *testing.B) {
			s := open(b, newSchema(b))
			calls := (b.N + size - 1) / size
			var next atomic.Int64
			m := storetest.StartMeter(b)
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for {
						c := next.Add(1) - 1
						if c >= int64(calls) {
							return
						}
						in := make([]*store.Task, size)
						for i := range in {
							in[i] = benchTask(c*size + int64(i))
						}
						res, err := s.TaskCreateBatch(context.Background(), in)
						if err != nil || !res[0].Created {
							b.Errorf("TaskCreateBatch = %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			m.Report(b, calls*size)
		})
	}
}

// BenchmarkCreateInstances runs one and two stores on one schema, as
// retryd instances sharing a database, each creating tasks one call at a
// time from 8 goroutines: two instances should create at least as fast as
// one, their commits not queueing on each other's notifications.
func BenchmarkCreateInstances(b *testing.B) {
	for _, instances := range []int{1, 2} {
		b.Run(fmt.Sprint("instances=", instances, ",callers=8"), func(b *testing.B) {
			schema := newSchema(b)
			stores := make([]*postgres.Store, instances)
			for i := range stores {
				stores[i] = open(b, schema)
			}
			var next atomic.Int64
			m := storetest.StartMeter(b)
			var wg sync.WaitGroup
			for _, s := range stores {
				for range 8 {
					wg.Go(func() {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							if _, _, err := s.TaskCreate(context.Background(), benchTask(i)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			m.Report(b, b.N)
		})
	}
}

// BenchmarkCreateRuns creates tasks one call at a time from 8 and 16
// goroutines with one, two and four batches of creates under way at once:
// the measurement behind createRuns.
func BenchmarkCreateRuns(b *testing.B) {
	for _, runs := range []int{1, 2, 4} {
		b.Run(fmt.Sprint("runs=", runs), func(b *testing.B) {
			storetest.BenchCreate(b, func(b *testing.B) store.Store {
				return open(b, newSchema(b), postgres.WithCreateRuns(runs))
			}, 8, 16)
		})
	}
}
