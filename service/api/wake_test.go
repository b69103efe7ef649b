package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store/sqlite"
)

// The API wakes the real scheduler: with its periodic resync an hour away,
// a task created or redriven after the scheduler has started runs only
// because the API told it the task is due.
func TestWakeRunsCreatedAndRedrivenTasks(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flaky" && !healthy.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)

	e := schedulerEnv(t)
	e.putPolicy(t, `{"policyId":"p","maxAttempts":1}`)

	// The first task may be found by the scheduler's start-up scan; once it
	// has run, that scan is over.
	first := e.createTask(t, `{"targetUrl":"`+target.URL+`/ok","policyId":"p"}`)["taskId"].(string)
	e.waitStatus(t, first, "SUCCEEDED")

	second := e.createTask(t, `{"targetUrl":"`+target.URL+`/ok","policyId":"p"}`)["taskId"].(string)
	e.waitStatus(t, second, "SUCCEEDED")

	flaky := e.createTask(t, `{"targetUrl":"`+target.URL+`/flaky","policyId":"p"}`)["taskId"].(string)
	e.waitStatus(t, flaky, "FAILED")
	healthy.Store(true)
	e.do(t, "POST", "/retry-tasks/"+flaky+"/redrive", "").wantStatus(t, http.StatusOK)
	e.waitStatus(t, flaky, "SUCCEEDED")
}

// Tasks created by a batch wake the scheduler too, and one with a notBefore
// runs then, never before.
func TestWakeRunsBatchTasksAtNotBefore(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(target.Close)
	e := schedulerEnv(t)
	e.putPolicy(t, `{"policyId":"p","maxAttempts":1}`)
	first := e.createTask(t, `{"targetUrl":"`+target.URL+`/","policyId":"p"}`)["taskId"].(string)
	e.waitStatus(t, first, "SUCCEEDED") // the start-up scan is over

	notBefore := time.Now().Add(300 * time.Millisecond).UnixMilli()
	items := e.batchItems(t, fmt.Sprintf(`{"tasks":[{"targetUrl":"%s/now","policyId":"p"},{"targetUrl":"%s/later","policyId":"p","notBefore":%d}]}`,
		target.URL, target.URL, notBefore))
	now := wantItemTask(t, 0, items[0], http.StatusCreated)["taskId"].(string)
	later := wantItemTask(t, 1, items[1], http.StatusCreated)["taskId"].(string)
	e.waitStatus(t, now, "SUCCEEDED")
	e.waitStatus(t, later, "SUCCEEDED")
	attempts := e.do(t, "GET", "/retry-tasks/"+later+"/attempts", "").wantStatus(t, http.StatusOK)["items"].([]any)
	if started := int64(attempts[0].(map[string]any)["startedAt"].(float64)); started < notBefore {
		t.Errorf("the attempt started at %d, before notBefore %d", started, notBefore)
	}
}

// schedulerEnv is an API over a real store, waking a real scheduler whose
// periodic resync is an hour away, so that tasks run only when woken.
func schedulerEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	disp := dispatch.New(dispatch.Config{Guard: dispatch.Guard{AllowPrivate: true}, Timeout: 5 * time.Second})
	t.Cleanup(disp.Close)
	sched, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: disp, Resync: time.Hour, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- sched.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("scheduler Run: %v", err)
		}
	})
	h, err := api.New(api.Config{Store: st, Waker: sched})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{srv: srv, store: st}
}

// waitStatus polls the task until it has the status; the bound is only
// there so that a broken wake fails the test instead of hanging it.
func (e *env) waitStatus(t *testing.T, id, status string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := e.do(t, "GET", "/retry-tasks/"+id, "").wantStatus(t, http.StatusOK)
		if got["status"] == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %v, never became %s", id, got["status"], status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
