package scheduler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// doneRecorder counts finished tasks.
type doneRecorder struct{ done atomic.Int64 }

func (r *doneRecorder) Lag(string, time.Duration)            {}
func (r *doneRecorder) LeaseLost(string, string)             {}
func (r *doneRecorder) Terminal(store.Status, time.Duration) { r.done.Add(1) }

// BenchmarkAttempts pushes b.N tasks, one successful attempt each, through
// the scheduler, the dispatcher, a loopback target and a SQLite store with
// its normal durability, and reports attempts/s. (Every task is due at
// once, so the dispatch lag here is a backlog, not a measure of scheduling;
// "retryd bench" measures that.)
func BenchmarkAttempts(b *testing.B) {
	st := openStore(b, "")
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer target.Close()
	putPolicy(b, st, "p", fast(1))
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if _, _, err := st.TaskCreate(ctx, &store.Task{Tenant: tenant, TargetURL: target.URL, Method: "POST",
					PolicyID: "p", RequestHash: strconv.FormatInt(i, 10)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rec := &doneRecorder{}
	b.ResetTimer()
	began := time.Now()
	_, stop := start(b, st, options{cfg: scheduler.Config{Recorder: rec}})
	for rec.done.Load() < int64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "attempts/s")
}

// BenchmarkResync measures how long rebuilding the heap from the store
// takes per live task, for a backlog of 20,000 PENDING tasks in a SQLite
// store (the work of a scheduler's start and of each periodic resync).
func BenchmarkResync(b *testing.B) {
	const n = 20000
	st := openStore(b, "")
	putPolicy(b, st, "p", fast(1))
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= n; i = next.Add(1) {
				if _, _, err := st.TaskCreate(ctx, &store.Task{Tenant: tenant, TargetURL: "http://127.0.0.1:9/x",
					Method: "POST", PolicyID: "p", RequestHash: strconv.FormatInt(i, 10), NextAttemptAt: due}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: dispatch.New(dispatch.Config{})})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.Resync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/task")
}
