package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
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
func schedulerEnv(t *testing.T) *env { return schedulerEnvOn(t, "sqlite") }

// schedulerEnvOn is schedulerEnv on a backend (see openBackend), the
// scheduler taking the tasks the store creates claimed (Config.Handoff).
func schedulerEnvOn(t *testing.T, backend string) *env {
	t.Helper()
	var st store.Store
	var sq *sqlite.Store
	if backend == "sqlite" {
		var err error
		if sq, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sq.Close() })
		st = sq
	} else {
		st = openBackend(t, backend)
	}
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
	h, err := api.New(api.Config{Store: st, Waker: sched, Handoff: sched})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{srv: srv, store: sq, st: st}
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

// A task created due at once is handed to the scheduler created claimed
// by a store that does it (store.CreateClaimer): answered IN_FLIGHT at attempt 1,
// its attempt started without a claim; by the others created PENDING and
// woken. Either way each task is sent once and succeeds, and one due
// later waits for its time.
func TestHandoffRunsCreatedTasks(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		var mu sync.Mutex
		sent := map[string]int{}
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			sent[r.URL.Path]++
			mu.Unlock()
		}))
		t.Cleanup(target.Close)
		e := schedulerEnvOn(t, backend)
		e.putPolicy(t, `{"policyId":"p","maxAttempts":1}`)
		_, claimed := e.st.(store.CreateClaimer)

		one := e.createTask(t, `{"targetUrl":"`+target.URL+`/one","policyId":"p"}`)
		notBefore := time.Now().Add(300 * time.Millisecond).UnixMilli()
		items := e.batchItems(t, fmt.Sprintf(`{"tasks":[{"targetUrl":"%s/a","policyId":"p"},{"targetUrl":"%s/b","policyId":"p"},`+
			`{"targetUrl":"%s/later","policyId":"p","notBefore":%d}]}`, target.URL, target.URL, target.URL, notBefore))
		tasks := []map[string]any{one, wantItemTask(t, 0, items[0], http.StatusCreated),
			wantItemTask(t, 1, items[1], http.StatusCreated)}
		for _, task := range tasks {
			want, attempt := "PENDING", 0.0
			if claimed {
				want, attempt = "IN_FLIGHT", 1
			}
			if task["status"] != want || task["attemptNumber"] != attempt {
				t.Errorf("created %v: %v at attempt %v, want %s at %v", task["targetUrl"], task["status"],
					task["attemptNumber"], want, attempt)
			}
		}
		later := wantItemTask(t, 2, items[2], http.StatusCreated)
		if later["status"] != "PENDING" {
			t.Errorf("the task due later was created %v, want PENDING", later["status"])
		}
		for _, task := range append(tasks, later) {
			e.waitStatus(t, task["taskId"].(string), "SUCCEEDED")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, path := range []string{"/one", "/a", "/b", "/later"} {
			if sent[path] != 1 {
				t.Errorf("%s was sent %d times, want once", path, sent[path])
			}
		}
	})
}
