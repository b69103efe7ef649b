package run

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// benchConfig is what the bench flags say.
type benchConfig struct {
	dir      string
	tasks    int
	attempts int
	workers  int
	rate     int
	ahead    time.Duration
	duration time.Duration
	skipTput bool
	skipLag  bool
	cpuProf  string
	memProf  string
	target   string
}

// Bench measures retryd's scheduler, dispatcher and store together, in
// process, against an HTTP target on 127.0.0.1, and writes a report to
// stdout. Two runs:
//
//   - throughput: --tasks tasks, each answered 503 until its --attempts-th
//     attempt, with no backoff delay, so every attempt is a claim, a call
//     and a durable finish; it reports attempts per second.
//   - lag: tasks created at --rate per second for --duration, each due
//     --ahead after its creation; it reports p50/p99/max dispatch lag (an
//     attempt's start minus its due time).
//
// The store is the embedded SQLite one, in a new file, with its normal
// durability (WAL, synchronous=FULL, group commit). The target is lean by
// default (see targetLean); --target net/http makes it Go's server.
func Bench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c benchConfig
	fs := flag.NewFlagSet("retryd bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dir, "dir", "", "folder for the benchmark's store file (default: a new temporary folder)")
	fs.IntVar(&c.tasks, "tasks", 2000, "throughput run: number of tasks")
	fs.IntVar(&c.attempts, "attempts", 10, "throughput run: attempts each task makes (all but the last answered 503)")
	fs.IntVar(&c.workers, "workers", scheduler.DefaultWorkers, "attempts in flight at once")
	fs.IntVar(&c.rate, "rate", 2000, "lag run: tasks coming due per second")
	fs.DurationVar(&c.ahead, "ahead", time.Second, "lag run: how far ahead of its creation each task is due")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "lag run: how long tasks keep coming")
	fs.BoolVar(&c.skipTput, "skip-throughput", false, "skip the throughput run")
	fs.BoolVar(&c.skipLag, "skip-lag", false, "skip the lag run")
	fs.StringVar(&c.target, "target", targetLean, "the loopback target: "+targetLean+" (a minimal HTTP/1.1 responder, so that the figures are retryd's) or "+targetNetHTTP+" (Go's server)")
	fs.StringVar(&c.cpuProf, "cpuprofile", "", "write a CPU profile of the runs to this `file`")
	fs.StringVar(&c.memProf, "memprofile", "", "write an allocation profile of the runs to this `file`")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if c.cpuProf != "" {
		f, err := os.Create(c.cpuProf)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.memProf != "" {
		defer writeAllocs(c.memProf, stderr)
	}
	if c.tasks < 1 || c.attempts < 1 || c.rate < 1 || c.duration <= 0 {
		return usageError{fmt.Errorf("--tasks, --attempts, --rate and --duration must be positive")}
	}
	tg, err := startTarget(c.target, c.attempts)
	if err != nil {
		return err
	}
	defer tg.Close()
	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "retryd-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	fmt.Fprintf(stdout, "retryd bench: store sqlite (WAL, synchronous=FULL, group commit) in %s; target http://%s (%s); workers %d\n",
		dir, tg.addr, c.target, c.workers)
	if !c.skipTput {
		if err := benchThroughput(ctx, c, tg, filepath.Join(dir, "throughput.db"), stdout); err != nil {
			return err
		}
	}
	if !c.skipLag {
		if err := benchLag(ctx, c, tg, filepath.Join(dir, "lag.db"), stdout); err != nil {
			return err
		}
	}
	return nil
}

// writeAllocs writes the allocations made so far to path, for go tool pprof
// (-sample_index=alloc_space shows where the garbage comes from).
func writeAllocs(path string, stderr io.Writer) {
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(stderr, "retryd bench: memprofile: %v\n", err)
	}
}

// rig is one store and scheduler under measurement.
type rig struct {
	st    *sqlite.Store
	sched *scheduler.Scheduler
	rec   *benchRecorder
	disp  *dispatch.Dispatcher
}

func newRig(ctx context.Context, path string, workers int, policy retry.Policy) (*rig, error) {
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(policy)
	if err == nil {
		_, _, err = st.PolicyPut(ctx, &store.Policy{Tenant: "bench", ID: "bench", Spec: spec})
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	disp := dispatch.New(dispatch.Config{
		Guard:          dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		MaxIdlePerHost: workers,
	})
	rec := &benchRecorder{}
	sched, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: disp, Recorder: rec, Workers: workers,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &rig{st: st, sched: sched, rec: rec, disp: disp}, nil
}

func (r *rig) close() {
	r.disp.Close()
	r.st.Close()
}

// createTasks creates n tasks due at due(i), 64 at a time so that the
// store's group commit shares its fsyncs, and wakes the scheduler for each.
func (r *rig) createTasks(ctx context.Context, url string, n int, due func(i int) time.Time) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first error
		once  sync.Once
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				if err := r.createTask(ctx, url, i, due(i)); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func (r *rig) createTask(ctx context.Context, url string, i int, due time.Time) error {
	t, _, err := r.st.TaskCreate(ctx, &store.Task{
		Tenant: "bench", TargetURL: url, Method: "POST", Body: []byte(`{"n":` + strconv.Itoa(i) + `}`),
		PolicyID: "bench", RequestHash: strconv.Itoa(i), NextAttemptAt: due,
	})
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	r.sched.Wake(t.Due())
	return nil
}

// benchRecorder counts what the scheduler reports and keeps every lag.
type benchRecorder struct {
	mu       sync.Mutex
	lags     []time.Duration
	attempts atomic.Int64
	terminal atomic.Int64
}

func (b *benchRecorder) Lag(d time.Duration) {
	b.mu.Lock()
	b.lags = append(b.lags, d)
	b.mu.Unlock()
}

func (b *benchRecorder) Attempt(outcome, policy string)       { b.attempts.Add(1) }
func (b *benchRecorder) Terminal(store.Status, time.Duration) { b.terminal.Add(1) }
func (b *benchRecorder) waitTerminal(ctx context.Context, n int64) error {
	for b.terminal.Load() < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// benchPolicy retries at once, up to attempts calls.
func benchPolicy(attempts int) retry.Policy {
	return retry.Policy{MaxAttempts: attempts, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 0, Max: time.Second, Jitter: backoff.NoJitter}}
}

var _ scheduler.Recorder = (*benchRecorder)(nil)
