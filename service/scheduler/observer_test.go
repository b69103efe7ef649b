package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// heard keeps every event an Observer is told.
type heard struct {
	mu     sync.Mutex
	events []retry.Event
}

func (h *heard) Observe(_ context.Context, e retry.Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *heard) all() []retry.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]retry.Event(nil), h.events...)
}

// waitEvents waits until h has heard n events (the last is told just after
// the store has the task's final state).
func (h *heard) waitEvents(t *testing.T, n int) []retry.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		es := h.all()
		if len(es) >= n || time.Now().After(deadline) {
			return es
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestObserverHearsAttempts: a real target behind a real store; the
// Observer hears one event per attempt, in retry's terms.
func TestObserverHearsAttempts(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	pol := retry.Policy{MaxAttempts: 3, Backoff: backoffFixed(delay)}
	tests := []struct {
		name   string
		script []int
		want   []retry.Outcome
		reason error // of the last event, a GaveUp
		status store.Status
	}{
		{"503 then 200", []int{503, 200}, []retry.Outcome{retry.Retrying, retry.Succeeded}, nil, store.Succeeded},
		{"503 every time", []int{503}, []retry.Outcome{retry.Retrying, retry.Retrying, retry.GaveUp}, retry.ErrAttemptsExhausted, store.Exhausted},
		{"400", []int{400, 200}, []retry.Outcome{retry.GaveUp}, retry.ErrNotRetryable, store.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, "")
			tg := newTarget(t, tt.script...)
			putPolicy(t, st, "pol", pol)
			task := addTask(t, st, tg.URL+"/hook", "pol")
			h := &heard{}
			start(t, st, options{cfg: scheduler.Config{Observer: h}})

			got := waitFor(t, st, task.ID, terminal)
			if got.Status != tt.status {
				t.Fatalf("task %s, want %s", got.Status, tt.status)
			}
			es := h.waitEvents(t, len(tt.want))
			if len(es) != len(tt.want) {
				t.Fatalf("heard %d events, want %d: %+v", len(es), len(tt.want), es)
			}
			time.Sleep(20 * time.Millisecond) // nothing more comes
			if n := len(h.all()); n != len(tt.want) {
				t.Fatalf("heard %d events, want %d", n, len(tt.want))
			}
			for i, e := range es {
				status := tt.script[min(i, len(tt.script)-1)]
				if e.Outcome != tt.want[i] || e.Attempt != i+1 || e.MaxAttempts != 3 || e.Name != "pol" {
					t.Fatalf("event %d = %v attempt %d/%d of %q, want %v attempt %d/3 of \"pol\"",
						i, e.Outcome, e.Attempt, e.MaxAttempts, e.Name, tt.want[i], i+1)
				}
				if e.Duration <= 0 || e.Elapsed < e.Duration {
					t.Errorf("event %d: Duration %v, Elapsed %v", i, e.Duration, e.Elapsed)
				}
				switch e.Outcome {
				case retry.Succeeded:
					if e.Err != nil || e.Reason != nil || e.Delay != 0 {
						t.Errorf("success %d: Err %v, Reason %v, Delay %v", i, e.Err, e.Reason, e.Delay)
					}
					continue
				case retry.Retrying:
					// NextAttemptAt is rounded up to the millisecond.
					if e.Delay < delay || e.Delay > delay+time.Millisecond || e.Reason != nil {
						t.Errorf("retry %d: Delay %v, want %v; Reason %v", i, e.Delay, delay, e.Reason)
					}
				case retry.GaveUp:
					if e.Reason != tt.reason || e.Delay != 0 {
						t.Errorf("give-up %d: Reason %v, want %v; Delay %v", i, e.Reason, tt.reason, e.Delay)
					}
				}
				if code, ok := retry.StatusCode(e.Err); !ok || code != status {
					t.Errorf("event %d: Err %v has status %d, %v; want %d", i, e.Err, code, ok, status)
				}
				if e.Err.Error() == "" {
					t.Errorf("event %d: Err without a message", i)
				}
			}
		})
	}
}

// TestObserverHearsTransportError: an attempt without an answer carries
// the transport's error under the attempt log's message, and no status.
func TestObserverHearsTransportError(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	url := tg.URL + "/hook"
	tg.Close() // nothing listens: connection refused
	putPolicy(t, st, "pol", fast(1))
	task := addTask(t, st, url, "pol")
	h := &heard{}
	start(t, st, options{cfg: scheduler.Config{Observer: h}})

	got := waitFor(t, st, task.ID, terminal)
	es := h.waitEvents(t, 1)
	if len(es) != 1 {
		t.Fatalf("heard %d events, want 1", len(es))
	}
	e := es[0]
	if e.Outcome != retry.GaveUp || e.Reason != retry.ErrAttemptsExhausted || e.Err == nil {
		t.Fatalf("event = %v, Reason %v, Err %v; want gave-up, attempts exhausted", e.Outcome, e.Reason, e.Err)
	}
	if _, ok := retry.StatusCode(e.Err); ok {
		t.Errorf("Err %v has a status", e.Err)
	}
	if errors.Unwrap(e.Err) == nil {
		t.Errorf("Err %v carries no transport error", e.Err)
	}
	if !strings.HasPrefix(got.LastError, e.Err.Error()+" (") {
		t.Errorf("Err %q, task's last error %q", e.Err, got.LastError)
	}
}

// TestDebugLogsEachAttemptOnce: at Debug, the scheduler writes one line per
// attempt, retry.Log's, with the task's ID.
func TestDebugLogsEachAttemptOnce(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 200)
	putPolicy(t, st, "pol", retry.Policy{MaxAttempts: 3, Backoff: backoffFixed(20 * time.Millisecond)})
	task := addTask(t, st, tg.URL+"/hook", "pol")
	var logs syncBuffer
	h := &heard{}
	cfg := schedulerConfig(time.Hour)
	cfg.Observer = h
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	start(t, st, options{cfg: cfg})

	waitFor(t, st, task.ID, terminal)
	h.waitEvents(t, 2)
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "op=pol") {
			lines = append(lines, l)
		}
	}
	// NextAttemptAt is rounded up to the millisecond: 20ms or 21ms.
	want := []*regexp.Regexp{
		regexp.MustCompile(`level=WARN msg="attempt 1/3 failed; retrying in 2[01]ms" task=` + task.ID + ` error="HTTP 503 Service Unavailable" op=pol$`),
		regexp.MustCompile(`level=DEBUG msg="attempt 2/3 succeeded" task=` + task.ID + ` op=pol$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("%d attempt lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, l := range lines {
		if !want[i].MatchString(l) {
			t.Errorf("line %d = %s\nwant %s", i, l, want[i])
		}
	}
}

// lostLeases counts what a Recorder hears of lost leases: "tenant/policy".
type lostLeases struct {
	mu       sync.Mutex
	policies []string
}

func (*lostLeases) Lag(string, time.Duration)            {}
func (*lostLeases) Terminal(store.Status, time.Duration) {}
func (r *lostLeases) LeaseLost(tenant, policy string) {
	r.mu.Lock()
	r.policies = append(r.policies, tenant+"/"+policy)
	r.mu.Unlock()
}

func (r *lostLeases) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.policies...)
}

// TestLeaseLostIsNoAttemptEvent: an outcome the store refuses because
// another worker took the task over is counted by the Recorder, and the
// Observer hears nothing of it.
func TestLeaseLostIsNoAttemptEvent(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	tg.block = make(chan struct{})
	putPolicy(t, st, "pol", fast(3))
	task := addTask(t, st, tg.URL+"/hook", "pol")
	h, rec := &heard{}, &lostLeases{}
	start(t, st, options{
		cfg:  scheduler.Config{Observer: h, Recorder: rec, Lease: 2 * time.Second},
		disp: dispatch.Config{Timeout: time.Second / 2},
	})

	// The attempt is at the target; another worker claims the task as if
	// the lease had run out.
	tg.waitSeen(t, 1)
	taken, err := st.TaskClaim(context.Background(), store.ClaimParams{
		Now: time.Now().Add(3 * time.Second), Lease: time.Hour, IDs: []string{task.ID}})
	if err != nil || len(taken) != 1 {
		t.Fatalf("claim over the scheduler's lease: %d tasks, %v", len(taken), err)
	}
	close(tg.block)
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no lost lease recorded")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := rec.all(); len(got) != 1 || got[0] != tenant+"/pol" {
		t.Fatalf("lost leases %q, want [%s/pol]", got, tenant)
	}
	if es := h.all(); len(es) != 0 {
		t.Fatalf("the observer heard %+v of an outcome the store refused", es)
	}
}

// tenantHeard is a TenantObserver keeping the tenant of every event.
type tenantHeard struct {
	heard
	tenants []string
}

func (h *tenantHeard) Observe(context.Context, retry.Event) {
	panic("Observe called on a TenantObserver")
}

func (h *tenantHeard) ObserveTenant(ctx context.Context, tenant string, e retry.Event) {
	h.mu.Lock()
	h.tenants = append(h.tenants, tenant)
	h.mu.Unlock()
	h.heard.Observe(ctx, e)
}

// TestTenantObserverHearsTheTenant: an Observer that is a TenantObserver is
// told the task's tenant with each event, in place of Observe.
func TestTenantObserverHearsTheTenant(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 200)
	putPolicy(t, st, "pol", retry.Policy{MaxAttempts: 3, Backoff: backoffFixed(10 * time.Millisecond)})
	addTask(t, st, tg.URL+"/hook", "pol")
	h := &tenantHeard{}
	start(t, st, options{cfg: scheduler.Config{Observer: h}})
	if es := h.waitEvents(t, 2); len(es) != 2 || es[0].Name != "pol" || es[1].Outcome != retry.Succeeded {
		t.Fatalf("events %+v, want a retry then a success of pol", es)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.tenants) != 2 || h.tenants[0] != tenant || h.tenants[1] != tenant {
		t.Fatalf("tenants %q, want [%s %s]", h.tenants, tenant, tenant)
	}
}
