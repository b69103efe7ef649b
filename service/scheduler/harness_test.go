package scheduler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

const tenant = "t1"

// target is a real HTTP server on 127.0.0.1 that answers each request
// with the next status of its script (the last one repeats) and remembers
// every Idempotency-Key it saw.
type target struct {
	*httptest.Server
	mu     sync.Mutex
	script []int
	keys   []string
	header http.Header // extra response headers
	block  chan struct{}
}

func newTarget(t *testing.T, script ...int) *target {
	t.Helper()
	tg := &target{script: script, header: http.Header{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		n := len(tg.keys)
		tg.keys = append(tg.keys, r.Header.Get("Idempotency-Key"))
		status := tg.script[min(n, len(tg.script)-1)]
		for k, v := range tg.header {
			w.Header()[k] = v
		}
		block := tg.block
		tg.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) seen() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]string(nil), tg.keys...)
}

// waitSeen waits until tg has had n requests, failing after a generous
// limit.
func (tg *target) waitSeen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(tg.seen()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the target saw %d requests, want %d", len(tg.seen()), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func openStore(t testing.TB, path string) store.Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "retryd.db")
	}
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func putPolicy(t testing.TB, st store.Store, id string, p retry.Policy) {
	t.Helper()
	spec, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PolicyPut(context.Background(), &store.Policy{Tenant: tenant, ID: id, Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

func addTask(t *testing.T, st store.Store, url, policy string) *store.Task {
	t.Helper()
	task, _, err := st.TaskCreate(context.Background(), &store.Task{
		Tenant: tenant, TargetURL: url, Method: "POST", Body: []byte("hi"), PolicyID: policy,
		RequestHash: "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

type options struct {
	cfg  scheduler.Config
	disp dispatch.Config
}

// start runs a scheduler on st until the test ends (or stop is called) and
// returns it with a stop func that waits for Run to return.
func start(t testing.TB, st store.Store, o options) (*scheduler.Scheduler, func()) {
	t.Helper()
	o.disp.Guard = dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	if o.disp.Timeout == 0 {
		o.disp.Timeout = 5 * time.Second
	}
	d := dispatch.New(o.disp)
	t.Cleanup(d.Close)
	cfg := o.cfg
	cfg.Store, cfg.Dispatcher = st, d
	if cfg.Lease == 0 {
		cfg.Lease = 10 * time.Second
	}
	s, err := scheduler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

// waitFor polls the task until cond holds, failing after a generous limit.
func waitFor(t *testing.T, st store.Store, id string, cond func(*store.Task) bool) *store.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, err := st.TaskGet(context.Background(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s stuck: status %s, attempt %d, last error %q", id, task.Status, task.AttemptNumber, task.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// get reads the task of tenant with id.
func get(t *testing.T, st store.Store, id string) *store.Task {
	t.Helper()
	got, err := st.TaskGet(context.Background(), tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func terminal(t *store.Task) bool { return t.Status.Terminal() }

func attempts(t *testing.T, st store.Store, id string) []*store.Attempt {
	t.Helper()
	items, _, err := st.AttemptList(context.Background(), tenant, id, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// fast is a policy without waits, for tests about outcomes, not timing.
func fast(maxAttempts int) retry.Policy {
	return retry.Policy{MaxAttempts: maxAttempts, Backoff: backoffFixed(time.Millisecond)}
}

// backoffFixed waits d before every retry; its Max leaves room for a
// server's Retry-After.
func backoffFixed(d time.Duration) backoff.Policy {
	return backoff.Policy{Kind: backoff.Fixed, Base: d, Max: 10 * time.Second, Jitter: backoff.NoJitter}
}

func schedulerConfig(resync time.Duration) scheduler.Config {
	return scheduler.Config{Resync: resync}
}
