package scheduler_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/store"
)

// heldCounter is a Recorder that counts the tasks admission held back.
type heldCounter struct {
	mu   sync.Mutex
	held map[string]int
}

func (r *heldCounter) Lag(string, time.Duration)            {}
func (r *heldCounter) LeaseLost(string, string)             {}
func (r *heldCounter) Terminal(store.Status, time.Duration) {}
func (r *heldCounter) Held(host string, _ bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]int{}
	}
	r.held[host]++
}

func (r *heldCounter) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[host]
}

// putPolicyWith registers p with a hostLimiter setting, as the API stores it.
func putPolicyWith(t *testing.T, st store.Store, id string, p retry.Policy, s hostlimit.Setting) {
	t.Helper()
	spec, err := hostlimit.Encode(&p, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.PolicyPut(context.Background(), &store.Policy{Tenant: tenant, ID: id, Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

func setting(t *testing.T, js string) hostlimit.Setting {
	t.Helper()
	s, err := hostlimit.ParseSetting([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hostLimits(t *testing.T) *hostlimit.Limits {
	t.Helper()
	ls, err := hostlimit.New(retry.LimiterConfig{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// A policy's ceiling holds tasks back, PENDING and uncharged, saying so in
// lastError; each then succeeds with one attempt, its only one charged.
func TestAdmissionHoldsUncharged(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, http.StatusOK)
	putPolicyWith(t, st, "slow", fast(3), setting(t, `{"floor": 4, "ceiling": 4}`))
	rec := &heldCounter{}
	cfg := schedulerConfig(time.Minute)
	cfg.HostLimits, cfg.Recorder = hostLimits(t), rec
	var tasks []*store.Task
	for range 6 {
		tasks = append(tasks, addTask(t, st, tg.URL+"/hook", "slow"))
	}
	start(t, st, options{cfg: cfg})
	sawHeld := false
	for _, tk := range tasks {
		got := waitFor(t, st, tk.ID, func(task *store.Task) bool {
			if task.Status == store.Pending && task.LastError == hostlimit.HeldMessage {
				if task.AttemptNumber != 0 {
					t.Errorf("held task %s has attempt %d, want 0", task.ID, task.AttemptNumber)
				}
				sawHeld = true
			}
			return terminal(task)
		})
		if got.Status != store.Succeeded || got.AttemptNumber != 1 || len(attempts(t, st, tk.ID)) != 1 {
			t.Errorf("task %s: %s after %d attempts (%d logged), want SUCCEEDED after 1", tk.ID, got.Status,
				got.AttemptNumber, len(attempts(t, st, tk.ID)))
		}
	}
	if n := len(tg.seen()); n != len(tasks) {
		t.Errorf("target saw %d requests, want %d", n, len(tasks))
	}
	host := hostlimit.Key(tg.URL)
	if rec.count(host) == 0 {
		t.Errorf("no task held from %s at 4 attempts/s", host)
	}
	if !sawHeld {
		t.Logf("no held task was seen between polls (held %d times)", rec.count(host))
	}
}

// Overloads slow a host down; the tasks held meanwhile are not charged:
// every task's attempt count is what its log and the target saw.
func TestAdmissionOverload(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	script := make([]int, 0, 40)
	for range 30 {
		script = append(script, http.StatusServiceUnavailable)
	}
	tg := newTarget(t, append(script, http.StatusOK)...)
	putPolicyWith(t, st, "p", fast(100), setting(t, `{"openForMs": 200, "circuitAfterMs": 100}`))
	rec := &heldCounter{}
	cfg := schedulerConfig(time.Minute)
	cfg.HostLimits, cfg.Recorder = hostLimits(t), rec
	var tasks []*store.Task
	for range 20 {
		tasks = append(tasks, addTask(t, st, tg.URL+"/hook", "p"))
	}
	start(t, st, options{cfg: cfg})
	charged := 0
	for _, tk := range tasks {
		got := waitFor(t, st, tk.ID, terminal)
		log := attempts(t, st, tk.ID)
		if got.Status != store.Succeeded || got.AttemptNumber != len(log) {
			t.Errorf("task %s: %s, attempt %d with %d logged; want SUCCEEDED, as many charged as logged", tk.ID,
				got.Status, got.AttemptNumber, len(log))
		}
		charged += got.AttemptNumber
	}
	if seen := len(tg.seen()); charged != seen {
		t.Errorf("%d attempts charged, target saw %d requests", charged, seen)
	}
	if rec.count(hostlimit.Key(tg.URL)) == 0 {
		t.Error("no task held back while the target answered 503")
	}
}

// A policy that turns the limiter off is never held back, whatever the
// host answers.
func TestAdmissionPolicyOff(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable,
		http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK)
	putPolicyWith(t, st, "off", fast(10), setting(t, `{"enabled": false}`))
	rec := &heldCounter{}
	cfg := schedulerConfig(time.Minute)
	cfg.HostLimits, cfg.Recorder = hostLimits(t), rec
	tk := addTask(t, st, tg.URL, "off")
	start(t, st, options{cfg: cfg})
	got := waitFor(t, st, tk.ID, terminal)
	if got.Status != store.Succeeded || got.AttemptNumber != 7 || strings.Contains(got.LastError, "held") {
		t.Errorf("task: %s after %d attempts, last error %q; want SUCCEEDED after 7", got.Status, got.AttemptNumber, got.LastError)
	}
	if n := rec.count(hostlimit.Key(tg.URL)); n != 0 {
		t.Errorf("held %d times with the limiter off", n)
	}
}
