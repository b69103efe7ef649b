package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/cmd/retryd/internal/run"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis/redistest"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Workload of BenchmarkInstances: the throughput run makes benchTasks
// tasks of benchAttempts attempts each (all but the last answered 500, no
// backoff); the lag run creates benchRate tasks a second for benchFor,
// each due benchAhead after its creation.
const (
	benchTasks    = 2000
	benchAttempts = 5
	benchRate     = 500
	benchFor      = 5 * time.Second
	benchAhead    = time.Second
)

// BenchmarkInstances measures retryd instances, in this process, on each
// store: attempts per second, and the dispatch lag (arrival at the target
// minus the task's due time) of tasks another process creates in the
// store, which the instances hear of through the store's change feed. The
// embedded SQLite store has no change feed and one instance at most: it
// has the throughput run only (`retryd bench` measures its lag). One
// iteration is one whole run; use -benchtime=1x.
func BenchmarkInstances(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres", "redis"} {
		for _, n := range []int{1, 2} {
			if kind == "sqlite" && n > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/instances=%d", kind, n), func(b *testing.B) {
				for b.Loop() {
					be := benchBackend(b, kind)
					tg := newBenchTarget(b)
					benchThroughput(b, be, tg, n)
					if kind != "sqlite" {
						benchLag(b, be, tg, n)
					}
				}
			})
		}
	}
}

func benchBackend(b *testing.B, kind string) backend {
	switch kind {
	case "postgres":
		return postgresBackend(b)
	case "redis":
		return redisBackend(b, redistest.URL(b))
	}
	path := filepath.Join(b.TempDir(), "retryd.db")
	return backend{name: "sqlite", store: path, open: func(t testing.TB) store.Store {
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}}
}

// benchThroughput stores the tasks first, then starts n instances and
// times them from their start to the target's last success.
func benchThroughput(b *testing.B, be backend, tg *benchTarget, n int) {
	st := be.open(b)
	putBenchPolicy(b, st, "tput", benchAttempts)
	now := time.Now()
	createPaced(b, st, benchTasks, "tput", func(int) (string, time.Time) {
		return tg.URL + "/fail/" + strconv.Itoa(benchAttempts), now
	})
	if be.name == "sqlite" {
		st.Close() // the instance owns the file
	}
	start := time.Now()
	stop := startInstances(b, be, n)
	last := tg.waitSuccesses(b, benchTasks)
	stop()
	attempts := tg.requests.Load()
	b.ReportMetric(float64(attempts)/last.Sub(start).Seconds(), "attempts/s")
}

// benchLag starts n instances, then creates tasks in the store at a steady
// rate, each due benchAhead later, and reports the target's view of lag.
func benchLag(b *testing.B, be backend, tg *benchTarget, n int) {
	st := be.open(b)
	putBenchPolicy(b, st, "lag", 1)
	stop := startInstances(b, be, n)
	defer stop()
	total := int(benchRate * benchFor.Seconds())
	interval := time.Second / benchRate
	begin := time.Now().Add(50 * time.Millisecond)
	tg.resetArrivals(total)
	due := func(i int) time.Time {
		return begin.Add(time.Duration(i)*interval + benchAhead).Truncate(time.Millisecond)
	}
	created := createPaced(b, st, total, "lag", func(i int) (string, time.Time) {
		time.Sleep(time.Until(begin.Add(time.Duration(i) * interval)))
		return tg.URL + "/lag/" + strconv.Itoa(i), due(i)
	})
	arrived := tg.waitArrivals(b, total)
	// A task the creating process stored only after it was due measures
	// the creation's backlog, not dispatch: it is counted apart.
	var lags []time.Duration
	for i, at := range arrived {
		if created[i].Before(due(i)) {
			lags = append(lags, at.Sub(due(i)))
		}
	}
	b.ReportMetric(float64(total-len(lags)), "created-late")
	if len(lags) == 0 {
		b.Fatal("every task was created after its due time")
	}
	slices.Sort(lags)
	q := func(p float64) float64 {
		return float64(lags[min(len(lags)-1, int(p*float64(len(lags))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "lag-p50-ms")
	b.ReportMetric(q(0.99), "lag-p99-ms")
	b.ReportMetric(float64(lags[len(lags)-1])/float64(time.Millisecond), "lag-max-ms")
}

func putBenchPolicy(b *testing.B, st store.Store, id string, attempts int) {
	spec, err := json.Marshal(retry.Policy{MaxAttempts: attempts,
		Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Max: time.Second, Jitter: backoff.NoJitter}})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := st.PolicyPut(context.Background(), &store.Policy{Tenant: "bench", ID: id, Spec: spec}); err != nil {
		b.Fatal(err)
	}
}

// createPaced creates n tasks with the policy, 64 at a time; task(i) says
// the URL and due time of the i-th and may wait first to pace creation. It
// returns when each TaskCreate returned.
func createPaced(b *testing.B, st store.Store, n int, policy string, task func(i int) (string, time.Time)) []time.Time {
	done := make([]time.Time, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				url, due := task(i)
				_, _, err := st.TaskCreate(context.Background(), &store.Task{Tenant: "bench", TargetURL: url,
					Method: "POST", PolicyID: policy, RequestHash: strconv.Itoa(i), NextAttemptAt: due})
				if err != nil {
					errs <- err
					return
				}
				done[i] = time.Now()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create task: %v", err)
	}
	return done
}

// startInstances runs n retryd instances (run.Serve) on be's store and
// returns a func that stops them and waits for them to finish.
func startInstances(b *testing.B, be backend, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	keyFile := filepath.Join(b.TempDir(), "retryd.key") // one key for the fleet
	if _, _, err := secrets.EnsureKeyFile(keyFile); err != nil {
		b.Fatal(err)
	}
	for range n {
		args := append([]string{"--store", be.store, "--listen", "127.0.0.1:0", "--allow-target", "127.0.0.1/32",
			"--secrets-key-file", keyFile}, be.flags...)
		c, err := run.ParseConfig(args, func(string) string { return "" }, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		ready := make(chan net.Addr, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run.Serve(ctx, c, slog.New(slog.DiscardHandler), ready); err != nil {
				b.Error(err)
			}
		}()
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			b.Fatal("retryd did not start")
		}
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// benchTarget answers /fail/N with 500 until a key's N-th request, then
// 200, and /lag/I with 200, noting when task I's first request came. It
// fails with 500, not 503: a 503 is an overload signal, which retryd's host
// limiters slow down for, and the bench measures a target that copes.
type benchTarget struct {
	*httptest.Server
	requests  atomic.Int64
	successes atomic.Int64
	lastOK    atomic.Int64 // unix ns of the latest 200
	perKey    sync.Map     // Idempotency-Key → *atomic.Int32
	mu        sync.Mutex
	arrivals  []time.Time // of /lag/I, by I
	arrived   int
}

func newBenchTarget(b *testing.B) *benchTarget {
	tg := &benchTarget{}
	tg.Server = httptest.NewServer(http.HandlerFunc(tg.serve))
	b.Cleanup(tg.Close)
	return tg
}

func (tg *benchTarget) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	tg.requests.Add(1)
	kind, arg, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	num, _ := strconv.Atoi(arg)
	if kind == "lag" {
		tg.mu.Lock()
		if num >= 0 && num < len(tg.arrivals) && tg.arrivals[num].IsZero() {
			tg.arrivals[num] = arrived
			tg.arrived++
		}
		tg.mu.Unlock()
	} else {
		v, _ := tg.perKey.LoadOrStore(r.Header.Get("Idempotency-Key"), new(atomic.Int32))
		if v.(*atomic.Int32).Add(1) < int32(num) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
	}
	tg.lastOK.Store(arrived.UnixNano())
	tg.successes.Add(1)
	w.WriteHeader(http.StatusOK)
}

// waitSuccesses waits for n successes and returns when the last came.
func (tg *benchTarget) waitSuccesses(b *testing.B, n int64) time.Time {
	deadline := time.Now().Add(5 * time.Minute)
	for tg.successes.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks succeeded in 5 minutes", tg.successes.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Unix(0, tg.lastOK.Load())
}

func (tg *benchTarget) resetArrivals(n int) {
	tg.mu.Lock()
	tg.arrivals, tg.arrived = make([]time.Time, n), 0
	tg.mu.Unlock()
}

// waitArrivals waits until each of the n lag tasks has arrived and returns
// when each did.
func (tg *benchTarget) waitArrivals(b *testing.B, n int) []time.Time {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		tg.mu.Lock()
		got, arrivals := tg.arrived, tg.arrivals
		tg.mu.Unlock()
		if got >= n {
			return arrivals
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d lag tasks arrived in 5 minutes", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
