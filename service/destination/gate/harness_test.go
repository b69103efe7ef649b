package gate_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// env is a retryd in one process: the real API and scheduler over a real
// SQLite file, sealing with a real key, calling real HTTP targets on
// loopback.
type env struct {
	t    *testing.T
	dir  string
	url  string // the API's
	st   store.Store
	keys *secrets.Keyring
}

// fastPolicy retries after 50 ms, up to 5 attempts.
const fastPolicy = `{"policyId":"fast","backoff":"FIXED","initialDelayMs":50,"maxAttempts":5,"jitterType":"NONE"}`

func setup(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := keyringFor(t)
	disp := dispatch.New(dispatch.Config{Guard: dispatch.Guard{AllowPrivate: true}, Timeout: 5 * time.Second})
	t.Cleanup(disp.Close)
	g, err := gate.New(gate.Config{Store: st, Limits: limits.NewLocal(), Keys: keys, Dispatcher: disp,
		MaxAge: 100 * time.Millisecond, Hold: 10 * time.Second, MaxTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	sched, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: disp, Destinations: g, Keys: keys, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Waker: sched, Handoff: sched, Keys: keys,
		DestinationBounds: destination.Bounds{MaxTimeout: 5 * time.Second}, DestinationChanged: g.Forget})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{t: t, dir: dir, url: srv.URL, st: st, keys: keys}
	e.call("POST", "/retry-policies", fastPolicy, http.StatusCreated)
	return e
}

// call sends a JSON request to the API and checks its status; it returns
// the answer's body.
func (e *env) call(method, path, body string, want int) []byte {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	return b
}

// task is what the tests read of a task's answer.
type task struct {
	TaskID         string            `json:"taskId"`
	IdempotencyKey string            `json:"idempotencyKey"`
	Status         string            `json:"status"`
	AttemptNumber  int               `json:"attemptNumber"`
	LastError      string            `json:"lastError"`
	DestinationID  string            `json:"destinationId"`
	Path           *string           `json:"path"`
	TargetURL      string            `json:"targetUrl"`
	Headers        map[string]string `json:"headers"`
}

func (e *env) create(body string) task {
	e.t.Helper()
	var tk task
	if err := json.Unmarshal(e.call("POST", "/retry-tasks", body, http.StatusCreated), &tk); err != nil {
		e.t.Fatal(err)
	}
	return tk
}

func (e *env) get(id string) task {
	e.t.Helper()
	var tk task
	if err := json.Unmarshal(e.call("GET", "/retry-tasks/"+id, "", http.StatusOK), &tk); err != nil {
		e.t.Fatal(err)
	}
	return tk
}

// wait polls task id until its status is want, for up to 10 s.
func (e *env) wait(id, want string) task {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk := e.get(id)
		if tk.Status == want {
			return tk
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s is %s (attempts %d, lastError %q) after 10 s, want %s", id, tk.Status, tk.AttemptNumber, tk.LastError, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// received is one request a target saw.
type received struct {
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time
}

// target is an HTTP server on loopback that records what it receives and
// answers with answer (200 when nil).
type target struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(r *http.Request) int
}

func newTarget(t *testing.T, answer func(r *http.Request) int) *target {
	tg := &target{answer: answer}
	tg.Server = httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tg.mu.Lock()
	tg.got = append(tg.got, received{Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body, At: time.Now()})
	tg.mu.Unlock()
	status := http.StatusOK
	if tg.answer != nil {
		status = tg.answer(r)
	}
	w.WriteHeader(status)
}

func (tg *target) requests() []received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]received(nil), tg.got...)
}

// jsonString quotes s for a JSON body.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// keyringFor returns a keyring of a new random key.
func keyringFor(t *testing.T) *secrets.Keyring {
	t.Helper()
	key := make([]byte, secrets.KeySize)
	rand.Read(key)
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
