package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/service/destination/secrets"
)

// binary is retryd, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "retryd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "retryd")
	// Every retryd of a test shares one secrets key, as a fleet does: a
	// shared store needs one.
	keyFile := filepath.Join(dir, "retryd.key")
	if _, _, err := secrets.EnsureKeyFile(keyFile); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e2eFlags = append(e2eFlags, "--secrets-key-file", keyFile)
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building retryd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a retryd process.
type daemon struct {
	t     *testing.T
	cmd   *exec.Cmd
	url   string
	token string // sent as a bearer token when set
	logs  *logBuffer
	done  chan struct{}
}

// logBuffer collects retryd's output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// e2eFlags are short timings so that leases expire within a test, and no
// host limiter: the tests' targets answer 503 to fail a few times, not to
// say they are overloaded, and a limiter would slow their tasks down to
// its floor (TestOverload turns it on).
var e2eFlags = []string{"--listen", "127.0.0.1:0", "--log-format", "json", "--lease", "2s",
	"--attempt-timeout", "1s", "--shutdown-grace", "2s", "--host-limiter", "off"}

// startDaemon runs retryd on the store file db with e2eFlags and args, and
// waits until it listens.
func startDaemon(t *testing.T, db string, args ...string) *daemon {
	t.Helper()
	return startDaemonEnv(t, nil, db, args...)
}

// startDaemonEnv is startDaemon with env added to retryd's environment,
// which otherwise holds only PATH: no RETRYD_* from the test's environment.
func startDaemonEnv(t *testing.T, env []string, db string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, done: make(chan struct{}), logs: &logBuffer{}}
	d.cmd = exec.Command(binary, append(append([]string{"--store", db}, e2eFlags...), args...)...)
	d.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			d.logs.mu.Lock()
			d.logs.buf.WriteString(line + "\n")
			d.logs.mu.Unlock()
			var rec struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "retryd listening" {
				listening <- rec.URL
			}
		}
		_ = d.cmd.Wait()
	}()
	select {
	case d.url = <-listening:
	case <-d.done:
		t.Fatalf("retryd exited before listening:\n%s", d.log())
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		t.Fatalf("retryd did not listen:\n%s", d.log())
	}
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("retryd log:\n%s", d.log())
		}
	})
	return d
}

func (d *daemon) log() string {
	d.logs.mu.Lock()
	defer d.logs.mu.Unlock()
	return d.logs.buf.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.t.Fatalf("retryd did not stop on SIGTERM:\n%s", d.log())
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		d.t.Fatalf("retryd exited with %d after SIGTERM:\n%s", code, d.log())
	}
}

// kill sends SIGKILL: no shutdown, no flush, as in a crash.
func (d *daemon) kill() {
	d.t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		d.t.Fatal(err)
	}
	<-d.done
}

// call sends a JSON request and decodes the answer into out (when not nil),
// failing the test unless the status is want.
func (d *daemon) call(method, path string, body any, want int, out any) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.url+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		d.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

type task struct {
	TaskID         string `json:"taskId"`
	IdempotencyKey string `json:"idempotencyKey"`
	Status         string `json:"status"`
	AttemptNumber  int    `json:"attemptNumber"`
	LastError      string `json:"lastError"`
	CreatedAt      int64  `json:"createdAt"`
}

type attempt struct {
	AttemptNumber  int    `json:"attemptNumber"`
	ResponseStatus int    `json:"responseStatus"`
	ErrorMessage   string `json:"errorMessage"`
}

func (d *daemon) putPolicy(id string, spec map[string]any) {
	d.t.Helper()
	body := map[string]any{"policyId": id}
	for k, v := range spec {
		body[k] = v
	}
	d.call("POST", "/retry-policies", body, http.StatusCreated, nil)
}

func (d *daemon) submit(url, policy string) task {
	d.t.Helper()
	var got task
	d.call("POST", "/retry-tasks", map[string]any{"targetUrl": url, "method": "POST", "body": "{}", "policyId": policy},
		http.StatusCreated, &got)
	return got
}

func (d *daemon) task(id string) task {
	d.t.Helper()
	var got task
	d.call("GET", "/retry-tasks/"+id, nil, http.StatusOK, &got)
	return got
}

func (d *daemon) attempts(id string) []attempt {
	d.t.Helper()
	var got struct{ Items []attempt }
	d.call("GET", "/retry-tasks/"+id+"/attempts?limit=1000", nil, http.StatusOK, &got)
	return got.Items
}

// waitTask polls until cond holds for the task.
func (d *daemon) waitTask(id string, cond func(task) bool) task {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := d.task(id)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("task %s stuck: %+v", id, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func terminal(t task) bool {
	switch t.Status {
	case "SUCCEEDED", "EXHAUSTED", "FAILED", "CANCELLED":
		return true
	}
	return false
}

func newDB(t *testing.T) string { return filepath.Join(t.TempDir(), "retryd.db") }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
