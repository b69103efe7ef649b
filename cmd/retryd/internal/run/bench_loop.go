package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// benchLoop makes the loop runs, each on fresh data in the bench's store:
//
//   - throughput: c.tasks tasks, each answered 500 until its c.attempts-th
//     attempt, with no backoff delay, so every attempt is a claim, a call
//     and a durable finish; it reports attempts per second.
//   - lag: tasks created at c.rate per second for c.duration, each due
//     c.ahead after its creation; it reports p50/p99/max dispatch lag (an
//     attempt's start minus its due time).
func benchLoop(ctx context.Context, c benchConfig, bs *benchStore, out io.Writer) error {
	var errs []error
	if !c.skipTput {
		errs = append(errs, loopRun(ctx, c, bs, "loop-throughput", c.attempts, out, benchThroughput))
	}
	if !c.skipLag && ctx.Err() == nil {
		errs = append(errs, loopRun(ctx, c, bs, "loop-lag", 1, out, benchLag))
	}
	return errors.Join(errs...)
}

// loopRun gives run a target answering 500 until each task's fail-th
// attempt and a fresh store, and cleans up after it.
func loopRun(ctx context.Context, c benchConfig, bs *benchStore, name string, fail int, out io.Writer,
	run func(context.Context, benchConfig, *target, Config, io.Writer) error) error {
	tg, err := startTarget(c.target, fail)
	if err != nil {
		return err
	}
	defer tg.Close()
	data, err := bs.fresh(ctx, name)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	sc := data.config()
	sc.Getenv = benchEnv(c.env)
	sc.HostLimiter = c.hostLimiter
	err = run(runCtx, c, tg, sc, out)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("did not finish within --timeout %v: %w", c.timeout, err)
	}
	if derr := data.drop(); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// rig is one store and scheduler under measurement, in process.
type rig struct {
	st    store.Store
	sched *scheduler.Scheduler
	rec   *benchRecorder
	disp  *dispatch.Dispatcher
	dest  *benchDestination // nil: tasks name their targetUrl
	// stopTracing flushes the spans left once the run is over.
	stopTracing func(time.Duration)
}

func newRig(ctx context.Context, sc Config, workers int, policy retry.Policy, destMode string) (*rig, error) {
	log := slog.New(slog.DiscardHandler)
	o, err := openStore(ctx, sc, log)
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(policy)
	if err == nil {
		_, _, err = o.PolicyPut(ctx, &store.Policy{Tenant: "bench", ID: "bench", Spec: spec})
	}
	if err != nil {
		o.Close()
		return nil, fmt.Errorf("register the policy: %w", err)
	}
	disp := dispatch.New(dispatch.Config{
		Guard:          dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
		MaxIdlePerHost: workers,
	})
	rec := &benchRecorder{}
	// As retryd serve does: spans exported when the environment says so.
	tp, stopTracing, err := startTracing(ctx, sc.Getenv, log)
	if err != nil {
		disp.Close()
		o.Close()
		return nil, err
	}
	// Tasks are created in this process, which wakes the scheduler itself:
	// no change feed is needed, whatever the store.
	hosts, err := sc.hostLimits()
	if err != nil {
		stopTracing(time.Second)
		disp.Close()
		o.Close()
		return nil, err
	}
	dest, err := newBenchDestination(o.Store, disp, destMode)
	if err != nil {
		stopTracing(time.Second)
		disp.Close()
		o.Close()
		return nil, err
	}
	sc2 := scheduler.Config{Store: o, Dispatcher: disp, Recorder: rec, Observer: rec, Workers: workers, Logger: log,
		Tracer: tp, HostLimits: hosts}
	if dest != nil {
		sc2.Destinations, sc2.Keys = dest.gate, dest.keys
	}
	sched, err := scheduler.New(sc2)
	if err != nil {
		if dest != nil {
			dest.close()
		}
		stopTracing(time.Second)
		disp.Close()
		o.Close()
		return nil, err
	}
	return &rig{st: o, sched: sched, rec: rec, disp: disp, dest: dest, stopTracing: stopTracing}, nil
}

func (r *rig) close() {
	if r.dest != nil {
		r.dest.close()
	}
	r.stopTracing(10 * time.Second)
	r.disp.Close()
	r.st.Close()
}

// benchEnv is the environment of the loop runs: the process's, with env
// (KEY=value entries) over it.
func benchEnv(env []string) func(string) string {
	return func(key string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
				return v
			}
		}
		return os.Getenv(key)
	}
}

// createTasks creates n tasks due at due(i), 64 at a time so that the
// store's group commit shares its fsyncs, and wakes the scheduler for each.
func (r *rig) createTasks(ctx context.Context, url string, n int, due func(i int) time.Time) error {
	if r.dest != nil {
		var err error
		if url, err = r.dest.target(ctx, url); err != nil {
			return err
		}
	}
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

// benchRecorder counts what the scheduler reports (attempts through its
// events, as retryd's metrics do) and keeps every lag.
type benchRecorder struct {
	mu       sync.Mutex
	lags     []time.Duration
	attempts atomic.Int64
	terminal atomic.Int64
}

func (b *benchRecorder) Lag(tenant string, d time.Duration) {
	b.mu.Lock()
	b.lags = append(b.lags, d)
	b.mu.Unlock()
}

func (b *benchRecorder) Observe(context.Context, retry.Event) { b.attempts.Add(1) }
func (b *benchRecorder) LeaseLost(string, string)             { b.attempts.Add(1) }
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
	return retry.Policy{MaxAttempts: attempts, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Max: time.Second, Jitter: backoff.NoJitter}}
}

var (
	_ scheduler.Recorder = (*benchRecorder)(nil)
	_ retry.Observer     = (*benchRecorder)(nil)
)
