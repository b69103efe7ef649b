package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// setupScheduled is setup with a real scheduler attempting the tasks, woken
// by the API, and a target on 127.0.0.1 that answers 503 to a path's
// first fails[path] requests, then 200.
func setupScheduled(t *testing.T, fails map[string]int) (s *server, target string) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	tgt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		if n <= fails[r.URL.Path] {
			http.Error(w, "not now", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(tgt.Close)

	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	disp := dispatch.New(dispatch.Config{Guard: dispatch.Guard{AllowPrivate: true}, Timeout: 5 * time.Second})
	t.Cleanup(disp.Close)
	sched, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: disp, Workers: 2})
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
	return apiServer(t, st, sched, nil), tgt.URL
}

// apiServer serves the API over st, waking waker when not nil, through
// wrap when not nil.
func apiServer(t *testing.T, st *sqlite.Store, waker api.Waker, wrap func(http.Handler) http.Handler) *server {
	t.Helper()
	tokens, err := api.ParseTokens(strings.NewReader(token + " acme\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Tokens: tokens, Waker: waker})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{url: srv.URL, store: st}
}

// wantInOrder fails unless out holds each of wants, each after the one
// before it.
func wantInOrder(t *testing.T, out string, wants ...string) {
	t.Helper()
	rest := out
	for _, w := range wants {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("output lacks %q after what came before:\n%s", w, out)
			return
		}
		rest = rest[i+len(w):]
	}
}

// attemptLines counts watch's lines of attempts.
func attemptLines(out string) int {
	n := 0
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "attempt ") {
			n++
		}
	}
	return n
}

func TestWatchToSucceeded(t *testing.T) {
	t.Parallel()
	s, target := setupScheduled(t, map[string]int{"/orders": 2})
	// Fixed delays long beside the polls, so that each wait is seen.
	s.ok(t, "policies", "put", "p", "--spec", `{"backoff":"FIXED","initialDelayMs":500,"jitterType":"NONE","maxAttempts":5}`)
	id := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", target+"/orders", "--not-before", "1s")["taskId"].(string)

	r := s.run(t, "", nil, "tasks", "watch", id, "--interval", "20ms")
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantInOrder(t, r.stdout,
		"PENDING: first attempt at ",
		"attempt 1  ", "  503  HTTP 503",
		"PENDING: next attempt (2) at ",
		"attempt 2  ", "  503  HTTP 503",
		"PENDING: next attempt (3) at ",
		"attempt 3  ", "  200",
		"SUCCEEDED after 3 attempt(s), at ")
	if n := attemptLines(r.stdout); n != 3 {
		t.Errorf("%d attempt lines, want 3:\n%s", n, r.stdout)
	}

	// Watching a task that has ended prints its history and its end.
	r = s.run(t, "", nil, "tasks", "watch", id, "--json")
	if r.code != cli.ExitOK {
		t.Fatalf("--json: exit %d\nstderr: %s", r.code, r.stderr)
	}
	var events []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Event   string
			Attempt *struct {
				AttemptNumber  int
				ResponseStatus int
			}
			Task *struct{ Status string }
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("--json printed %q: %v", l, err)
		}
		switch {
		case e.Attempt != nil:
			events = append(events, e.Event+":"+string(rune('0'+e.Attempt.AttemptNumber))+":"+http.StatusText(e.Attempt.ResponseStatus))
		case e.Task != nil:
			events = append(events, e.Event+":"+e.Task.Status)
		}
	}
	want := "attempt:1:Service Unavailable attempt:2:Service Unavailable attempt:3:OK end:SUCCEEDED"
	if got := strings.Join(events, " "); got != want {
		t.Errorf("--json events = %s\nwant %s", got, want)
	}
}

func TestWatchToExhausted(t *testing.T) {
	t.Parallel()
	s, target := setupScheduled(t, map[string]int{"/down": 3})
	s.ok(t, "policies", "put", "p", "--spec", `{"backoff":"FIXED","initialDelayMs":500,"jitterType":"NONE","maxAttempts":2}`)
	id := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", target+"/down")["taskId"].(string)

	r := s.run(t, "", nil, "tasks", "watch", id, "--interval", "20ms")
	if r.code != cli.ExitError {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, cli.ExitError, r.stdout, r.stderr)
	}
	wantInOrder(t, r.stdout, "attempt 1  ", "  503", "PENDING: next attempt (2) at ", "attempt 2  ", "  503",
		"EXHAUSTED after 2 attempt(s), at ", ": HTTP 503")
	wantContains(t, "stderr", r.stderr, "task "+id+" ended EXHAUSTED")

	// Redriven, the task starts its attempts at 1 again, after the old
	// ones in its log; the third request succeeds.
	s.ok(t, "dead-letters", "redrive", id)
	r = s.run(t, "", nil, "tasks", "watch", id, "--interval", "20ms")
	if r.code != cli.ExitOK {
		t.Fatalf("after the redrive: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantInOrder(t, r.stdout, "attempt 1  ", "  503", "attempt 2  ", "  503", "attempt 1  ", "  503", "attempt 2  ", "  200",
		"SUCCEEDED after 2 attempt(s)")
	if n := attemptLines(r.stdout); n != 4 {
		t.Errorf("%d attempt lines, want 4:\n%s", n, r.stdout)
	}
}

// cancelAfter is a Writer that calls cancel once n lines are written to it.
type cancelAfter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	n      int
	cancel func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := strings.Count(c.buf.String(), "\n")
	c.buf.Write(p)
	if before < c.n && strings.Count(c.buf.String(), "\n") >= c.n {
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelAfter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Ctrl-C (the context ending) stops a watch, which then exits 1 saying so.
func TestWatchStops(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p")
	id := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://h/", "--not-before", "1h")["taskId"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ctrl-C once the state is told, and a few polls later.
	out := &cancelAfter{n: 1, cancel: func() { time.AfterFunc(200*time.Millisecond, cancel) }}
	var errOut bytes.Buffer
	code := cli.Run(ctx, []string{"--url", s.url, "--token", token, "tasks", "watch", id, "--interval", "20ms"}, cli.Env{
		Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: out, Stderr: &errOut,
	})
	if code != cli.ExitError {
		t.Errorf("exit %d, want %d", code, cli.ExitError)
	}
	if n := strings.Count(out.String(), "PENDING: first attempt at "); n != 1 {
		t.Errorf("the state is told %d times, want once:\n%s", n, out.String())
	}
	wantContains(t, "stderr", errOut.String(), "stopped watching task "+id+" before it ended")

	if r := s.run(t, "", nil, "tasks", "watch", id, "--interval", "0s"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--interval") {
		t.Errorf("--interval 0s: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := s.run(t, "", nil, "tasks", "watch", "no-such-task"); r.code != cli.ExitError || !strings.Contains(r.stderr, "404") {
		t.Errorf("unknown task: exit %d, stderr %s", r.code, r.stderr)
	}
}

// syncBuffer is a Buffer a test reads while retryctl writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until b holds want; the bound only keeps a broken watch
// from hanging the test.
func waitFor(t *testing.T, b *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(b.String(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", want, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A watch outlives a retryd, or a proxy, that does not answer for a while:
// it says so once, and goes on when answers come again.
func TestWatchThroughAnOutage(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var down atomic.Bool
	s := apiServer(t, st, nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	s.ok(t, "policies", "put", "p", "--spec", `{"maxAttempts":2}`)
	id := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://h/x")["taskId"].(string)

	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- cli.Run(context.Background(), []string{"--url", s.url, "--token", token, "tasks", "watch", id, "--interval", "10ms"},
			cli.Env{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	}()
	waitFor(t, &out, "PENDING: first attempt at")
	down.Store(true)
	waitFor(t, &errOut, "trying again every 10ms")
	fail(t, st, id, store.Pending) // while retryd is out of reach
	time.Sleep(50 * time.Millisecond)
	down.Store(false)
	waitFor(t, &out, "PENDING: next attempt (2)")
	fail(t, st, id, store.Exhausted)
	if c := <-code; c != cli.ExitError {
		t.Errorf("exit %d, want %d", c, cli.ExitError)
	}
	wantInOrder(t, out.String(), "attempt 1  ", "PENDING: next attempt (2)", "attempt 2  ", "EXHAUSTED after 2 attempt(s)")
	if n := strings.Count(errOut.String(), "trying again"); n != 1 {
		t.Errorf("the outage is told %d times, want once:\n%s", n, errOut.String())
	}
	wantInOrder(t, errOut.String(), "502", "trying again every 10ms", "retryd answers again", "ended EXHAUSTED")

	// A first poll that fails ends the watch at once: the URL is wrong.
	down.Store(true)
	if r := s.run(t, "", nil, "tasks", "watch", id); r.code != cli.ExitError || !strings.Contains(r.stderr, "502") {
		t.Errorf("watch of a retryd out of reach: exit %d, stderr %q", r.code, r.stderr)
	}
}
