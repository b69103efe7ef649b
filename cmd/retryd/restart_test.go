package main_test

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPostgresRestart stops and starts the PostgreSQL server under two
// retryd instances in mid-run. It disrupts every test that uses the
// server, so it runs only when asked (RETRYKIT_DISRUPTIVE=1), and not in
// parallel with this package's other tests.
func TestPostgresRestart(t *testing.T) {
	if os.Getenv("RETRYKIT_DISRUPTIVE") != "1" {
		t.Skip("stops and starts the shared PostgreSQL server, failing other tests that use it meanwhile: " +
			"set RETRYKIT_DISRUPTIVE=1 to run it")
	}
	b := postgresBackend(t)
	ctl := func(action string) func() {
		return func() {
			t.Helper()
			out, err := exec.Command("sh", "-c", "pg_ctlcluster --skip-systemctl-redirect "+
				"$(ls /etc/postgresql | sort -V | tail -n 1) main "+action).CombinedOutput()
			if err != nil {
				t.Fatalf("pg_ctlcluster %s: %v\n%s", action, err, out)
			}
		}
	}
	checkResynced(t, storeRestart(t, b, ctl("stop"), ctl("start")))
}

// checkResynced waits until each instance has resynced its scheduler
// since the store's change feed came back (its reconnection backoff may
// have grown to several seconds during the outage).
func checkResynced(t *testing.T, ds []*daemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i, d := range ds {
		for !strings.Contains(d.log(), "resynced the scheduler") {
			if time.Now().After(deadline) {
				t.Errorf("instance %d did not resync when its change feed came back", i)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestRedisRestart does the same on a Redis server of its own, which keeps
// an append-only file synced on every write (appendfsync always), as a
// Redis for retryd must: a Redis without one loses every task on restart.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	srv := startRedisServer(t)
	checkResynced(t, storeRestart(t, redisBackend(t, srv.url()), srv.shutdown, srv.start))
}

// storeRestart runs tasks on two instances sharing b, calls stop mid-run,
// checks that the instances stay up but say they are not ready, calls
// start, and checks that they become ready again and that every task,
// created before or after, succeeds. It returns the instances.
func storeRestart(t *testing.T, b backend, stop, start func()) []*daemon {
	t.Helper()
	st := b.open(t)
	target := newFlaky(t)
	ds := startFleet(t, b, 2, "--lease", "5s", "--attempt-timeout", "1s")
	ds[0].putPolicy("patient", map[string]any{"backoff": "FIXED", "initialDelayMs": 200, "jitterType": "NONE", "maxAttempts": 50})
	const n = 200
	before := createMany(t, ds, target.URL+"/fail/3", "patient", n)
	deadline := time.Now().Add(30 * time.Second)
	for len(target.requests("")) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}

	stop()
	stopped := time.Now()
	for i, d := range ds {
		waitProbe(t, d, "/readyz", http.StatusServiceUnavailable, 30*time.Second)
		if got := probe(d, "/healthz"); got != http.StatusOK {
			t.Errorf("instance %d: /healthz = %d while the store is away, want 200: the process is fine", i, got)
		}
		if got := probe(d, "/retry-tasks/"+before[0].id); got < 500 {
			t.Errorf("instance %d: GET a task = %d while the store is away, want a 5xx", i, got)
		}
	}
	time.Sleep(time.Second) // the schedulers' store calls fail and back off meanwhile
	start()
	for _, d := range ds {
		waitProbe(t, d, "/readyz", http.StatusOK, time.Minute)
	}
	t.Logf("%s: store away for %v", b.name, time.Since(stopped).Round(time.Millisecond))

	after := createMany(t, ds, target.URL+"/fail/1", "patient", n/4)
	waitSucceeded(t, st, n+n/4, 2*time.Minute)
	for _, c := range append(before, after...) {
		reqs := target.requests(c.key)
		if len(reqs) == 0 || reqs[len(reqs)-1].status != http.StatusOK {
			t.Errorf("task %s SUCCEEDED but the target never answered its key 200 (%d requests)", c.id, len(reqs))
		}
	}
	for i, d := range ds {
		select {
		case <-d.done:
			t.Errorf("instance %d exited during the outage:\n%s", i, d.log())
		default:
		}
	}
	return ds
}
