package main_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// quick retries at once-ish: 50ms between attempts.
var quick = map[string]any{"backoff": "FIXED", "initialDelayMs": 50, "maxDelayMs": 1000, "jitterType": "NONE", "maxAttempts": 5}

func TestSuccessAfterFailuresWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("quick", quick)
	created := d.submit(target.URL+"/fail/2", "quick")

	got := d.waitTask(created.TaskID, terminal)
	if got.Status != "SUCCEEDED" || got.AttemptNumber != 3 {
		t.Fatalf("task %+v, want SUCCEEDED after 3 attempts", got)
	}
	reqs := target.requests(created.IdempotencyKey)
	if len(reqs) != 3 {
		t.Fatalf("target saw %d requests with the task's key, want 3 (all of them)", len(reqs))
	}
	if all := target.requests(""); len(all) != 3 {
		t.Fatalf("target saw %d requests in all, want 3", len(all))
	}
	log := d.attempts(created.TaskID)
	want := []int{503, 503, 200}
	if len(log) != len(want) {
		t.Fatalf("attempt log %+v, want %d entries", log, len(want))
	}
	for i, a := range log {
		if a.AttemptNumber != i+1 || a.ResponseStatus != want[i] {
			t.Fatalf("attempt %d = %+v, want #%d with %d", i, a, i+1, want[i])
		}
	}
}

func TestBadRequestFailsAtOnce(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("quick", quick)
	created := d.submit(target.URL+"/status/400", "quick")

	got := d.waitTask(created.TaskID, terminal)
	if got.Status != "FAILED" || got.AttemptNumber != 1 || !strings.Contains(got.LastError, "400") {
		t.Fatalf("task %+v, want FAILED after 1 attempt with the 400", got)
	}
	if n := len(target.requests("")); n != 1 {
		t.Fatalf("target saw %d requests, want 1", n)
	}
}

func TestExhaustionDeadLetterRedrive(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("two", map[string]any{"backoff": "FIXED", "initialDelayMs": 20, "jitterType": "NONE", "maxAttempts": 2})
	created := d.submit(target.URL+"/switch", "two")

	got := d.waitTask(created.TaskID, terminal)
	if got.Status != "EXHAUSTED" || got.AttemptNumber != 2 {
		t.Fatalf("task %+v, want EXHAUSTED after 2 attempts", got)
	}
	var dead struct{ Items []task }
	d.call("GET", "/dead-letters", nil, http.StatusOK, &dead)
	if len(dead.Items) != 1 || dead.Items[0].TaskID != created.TaskID {
		t.Fatalf("dead letters %+v, want just the task", dead.Items)
	}

	target.setHealthy()
	d.call("POST", "/retry-tasks/"+created.TaskID+"/redrive", nil, http.StatusOK, nil)
	got = d.waitTask(created.TaskID, terminal)
	if got.Status != "SUCCEEDED" {
		t.Fatalf("after redrive: %+v, want SUCCEEDED", got)
	}
	if reqs := target.requests(created.IdempotencyKey); len(reqs) != 3 || reqs[2].status != 200 {
		t.Fatalf("target saw %+v with the key, want 2 failures then a success, all with the same key", reqs)
	}
	d.call("GET", "/dead-letters", nil, http.StatusOK, &dead)
	if len(dead.Items) != 0 {
		t.Fatalf("dead letters after redrive %+v, want none", dead.Items)
	}
}

func TestBudgetExhaustion(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("budget", map[string]any{"backoff": "FIXED", "initialDelayMs": 100, "jitterType": "NONE",
		"maxAttempts": 100, "totalBudgetMs": 350})
	created := d.submit(target.URL+"/status/503", "budget")

	got := d.waitTask(created.TaskID, terminal)
	if got.Status != "EXHAUSTED" || !strings.Contains(got.LastError, "budget") {
		t.Fatalf("task %+v, want EXHAUSTED by the budget", got)
	}
	// 350ms hold at most 4 calls 100ms apart (0, 100, 200, 300); a slow
	// first call may leave room for fewer.
	if got.AttemptNumber < 1 || got.AttemptNumber > 4 {
		t.Fatalf("%d attempts, want 1 to 4 within a 350ms budget", got.AttemptNumber)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("slow", map[string]any{"backoff": "FIXED", "initialDelayMs": 60000, "jitterType": "NONE", "maxAttempts": 5})
	created := d.submit(target.URL+"/status/503", "slow")
	d.waitTask(created.TaskID, func(t task) bool { return t.AttemptNumber == 1 && t.Status == "PENDING" })

	d.call("DELETE", "/retry-tasks/"+created.TaskID, nil, http.StatusOK, nil)
	if got := d.task(created.TaskID); got.Status != "CANCELLED" {
		t.Fatalf("after DELETE: %+v, want CANCELLED", got)
	}
	d.call("DELETE", "/retry-tasks/"+created.TaskID, nil, http.StatusConflict, nil)
	if n := len(target.requests("")); n != 1 {
		t.Fatalf("target saw %d requests, want 1", n)
	}
}

func TestRestartBetweenAttemptsLosesNothing(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	db := newDB(t)
	d := startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	d.putPolicy("second", map[string]any{"backoff": "FIXED", "initialDelayMs": 1000, "jitterType": "NONE", "maxAttempts": 5})
	created := d.submit(target.URL+"/fail/2", "second")
	d.waitTask(created.TaskID, func(t task) bool { return t.AttemptNumber == 1 && t.Status == "PENDING" })
	d.stop()

	d = startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	got := d.waitTask(created.TaskID, terminal)
	if got.Status != "SUCCEEDED" || got.AttemptNumber != 3 {
		t.Fatalf("task %+v, want SUCCEEDED after 3 attempts", got)
	}
	if n := len(target.requests(created.IdempotencyKey)); n != 3 {
		t.Fatalf("target saw %d requests, want 3", n)
	}
}

func TestKill9WithTasksInFlight(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	db := newDB(t)
	d := startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	d.putPolicy("quick", quick)
	// Every attempt takes 300ms; half the tasks succeed at once, half after
	// one 503. Kill while many are in flight.
	const n = 40
	var tasks []task
	clean := map[string]int{} // requests a run without the kill makes
	for i := range n {
		c := d.submit(target.URL+"/slow/"+strconv.Itoa(i%2), "quick")
		tasks = append(tasks, c)
		clean[c.TaskID] = 1 + i%2
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(target.requests("")) < n/4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	d.kill()

	d = startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	extra, lost := 0, 0
	for _, c := range tasks {
		got := d.waitTask(c.TaskID, terminal)
		if got.Status != "SUCCEEDED" {
			t.Fatalf("task %+v, want SUCCEEDED", got)
		}
		log := d.attempts(c.TaskID)
		for _, a := range log {
			if strings.Contains(a.ErrorMessage, "lease expired") {
				lost++
			}
		}
		// Every request the target received is an attempt the log counts:
		// nothing was sent behind the log's back.
		if got := target.received(c.IdempotencyKey); got > len(log) {
			t.Fatalf("task %s: target received %d requests, the log has %d attempts", c.TaskID, got, len(log))
		}
		extra += target.received(c.IdempotencyKey) - clean[c.TaskID]
	}
	if lost == 0 {
		t.Fatalf("no attempt was lost to the kill; the test did not kill retryd mid-flight")
	}
	if extra > lost {
		t.Fatalf("%d duplicate requests, more than the %d attempts in flight at the kill", extra, lost)
	}
	t.Logf("kill -9: %d attempts lost in flight, %d duplicate requests", lost, extra)
}

func TestLoopbackTargetRefusedWithoutAllowFlag(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t))
	d.putPolicy("quick", quick)
	created := d.submit(target.URL+"/status/200", "quick")

	got := d.waitTask(created.TaskID, terminal)
	if got.Status != "FAILED" || !strings.Contains(got.LastError, "target address refused") {
		t.Fatalf("task %+v, want FAILED with the address refused", got)
	}
	if n := target.received(created.IdempotencyKey); n != 0 {
		t.Fatalf("target received %d requests, want none", n)
	}
}

func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("quick", quick)
	created := d.submit(target.URL+"/fail/1", "quick")
	d.waitTask(created.TaskID, terminal)

	for path, want := range map[string][]string{
		"/healthz": {"ok"},
		"/readyz":  {"ok"},
		"/metrics": {
			`retry_attempts_total{outcome="retry",policy="quick",tenant="default"} 1`,
			`retry_attempts_total{outcome="succeeded",policy="quick",tenant="default"} 1`,
			`retry_tasks{status="SUCCEEDED"} 1`,
			`retry_dead_letters 0`,
			`retry_dispatch_lag_seconds_count 2`,
			`retry_task_age_seconds_count{status="SUCCEEDED"} 1`,
		},
	} {
		resp, err := http.Get(d.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				t.Errorf("GET %s lacks %q", path, w)
			}
		}
	}
}

func TestRefusesPublicListenWithoutTokens(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "--listen", "0.0.0.0:0", "--store", newDB(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 {
		t.Fatalf("exit code %d (%v), want 2:\n%s", code, err, out)
	}
	if !strings.Contains(string(out), "without --tokens-file") {
		t.Fatalf("output lacks the reason:\n%s", out)
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	target := newFlaky(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	const tokenA, tokenB = "token-of-tenant-a-0123456789", "token-of-tenant-b-0123456789"
	if err := os.WriteFile(tokens, []byte(tokenA+" tenant-a\n"+tokenB+" tenant-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32", "--tokens-file", tokens)
	as := func(token string) *daemon { c := *d; c.token = token; return &c }
	a, b := as(tokenA), as(tokenB)

	d.call("GET", "/retry-policies", nil, http.StatusUnauthorized, nil)
	a.putPolicy("two", map[string]any{"backoff": "FIXED", "initialDelayMs": 10, "jitterType": "NONE", "maxAttempts": 2})
	created := a.submit(target.URL+"/status/503", "two")
	a.waitTask(created.TaskID, terminal)

	b.call("GET", "/retry-tasks/"+created.TaskID, nil, http.StatusNotFound, nil)
	b.call("GET", "/retry-tasks/"+created.TaskID+"/attempts", nil, http.StatusNotFound, nil)
	b.call("POST", "/retry-tasks/"+created.TaskID+"/redrive", nil, http.StatusNotFound, nil)
	b.call("DELETE", "/retry-tasks/"+created.TaskID, nil, http.StatusNotFound, nil)
	b.call("GET", "/retry-policies/two", nil, http.StatusNotFound, nil)
	var dead struct{ Items []task }
	b.call("GET", "/dead-letters", nil, http.StatusOK, &dead)
	if len(dead.Items) != 0 {
		t.Fatalf("tenant b sees dead letters %+v", dead.Items)
	}
	a.call("GET", "/dead-letters", nil, http.StatusOK, &dead)
	if len(dead.Items) != 1 {
		t.Fatalf("tenant a sees %d dead letters, want 1", len(dead.Items))
	}
	// Tenant b cannot use tenant a's policy either.
	b.call("POST", "/retry-tasks", map[string]any{"targetUrl": target.URL, "method": "POST", "policyId": "two"}, http.StatusBadRequest, nil)
}
