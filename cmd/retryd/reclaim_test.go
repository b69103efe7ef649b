package main_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangFirst is a target whose first request of each idempotency key hangs
// until the caller goes away, and whose later requests answer 200 at once.
type hangFirst struct {
	*httptest.Server
	mu       sync.Mutex
	perKey   map[string]int
	inFlight int // first requests hanging now
}

func newHangFirst(t *testing.T) *hangFirst {
	h := &hangFirst{perKey: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		h.mu.Lock()
		h.perKey[key]++
		first := h.perKey[key] == 1
		if first {
			h.inFlight++
		}
		h.mu.Unlock()
		if first {
			// The server notices a closed connection (the killed retryd's)
			// only once the body has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			h.mu.Lock()
			h.inFlight--
			h.mu.Unlock()
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.Close)
	return h
}

// waitInFlight waits until the target holds n attempts, for up to 30 s.
func (h *hangFirst) waitInFlight(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if in, _ := h.counts(); in == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attempts did not all reach the target")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// succeededAfterLoss checks that each of tasks, caught in flight by a
// kill, ended SUCCEEDED at attempt 2 on d, its first attempt logged as lost
// to the lease.
func succeededAfterLoss(t *testing.T, d *daemon, tasks []task) {
	t.Helper()
	for _, c := range tasks {
		got := d.waitTask(c.TaskID, terminal)
		if got.Status != "SUCCEEDED" || got.AttemptNumber != 2 {
			t.Errorf("task %+v, want SUCCEEDED at attempt 2", got)
		}
		log := d.attempts(c.TaskID)
		if len(log) != 2 || !strings.Contains(log[0].ErrorMessage, "lease expired") {
			t.Errorf("task %s attempts %+v, want the lost one then the success", c.TaskID, log)
		}
	}
}

func (h *hangFirst) counts() (inFlight int, perKey map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	perKey = make(map[string]int, len(h.perKey))
	for k, n := range h.perKey {
		perKey[k] = n
	}
	return h.inFlight, perKey
}

// TestSecondRetrydOnOneFileRefused: one retryd per database file.
func TestSecondRetrydOnOneFileRefused(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	startDaemon(t, db)
	cmd := exec.Command(binary, append([]string{"--store", db}, e2eFlags...)...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("a second retryd on the same file kept running:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "one retryd per database file") {
		t.Fatalf("second retryd: %v, output:\n%s\nwant a failure saying the file is in use", err, out)
	}
}

// TestKill9ReclaimsLeasesAtOnce kills retryd while attempts hang on their
// target, under a lease far longer than the test: the restarted retryd
// takes the dead one's leases back at start, so the tasks are tried again
// within seconds, each with its lost attempt counted (it was sent).
func TestKill9ReclaimsLeasesAtOnce(t *testing.T) {
	t.Parallel()
	target := newHangFirst(t)
	db := newDB(t)
	args := []string{"--allow-target", "127.0.0.1/32", "--lease", "10m", "--attempt-timeout", "5m"}
	d := startDaemon(t, db, args...)
	d.putPolicy("quick", quick)
	const n = 20
	var tasks []task
	for range n {
		tasks = append(tasks, d.submit(target.URL, "quick"))
	}
	target.waitInFlight(t, n)
	d.kill()

	restarted := time.Now()
	d = startDaemon(t, db, args...)
	if !strings.Contains(d.log(), "took back the leases") {
		t.Errorf("the restarted retryd did not say it took back the leases")
	}
	succeededAfterLoss(t, d, tasks)
	// The lease was ten minutes: waiting for it would take the test's
	// whole time limit. Taken back at start, the tasks finish in seconds.
	if took := time.Since(restarted); took > 2*time.Minute {
		t.Errorf("the tasks took %v to finish after the restart", took)
	}
	t.Logf("all %d tasks in flight at the kill succeeded %v after the restart", n, time.Since(restarted).Round(time.Millisecond))
	_, perKey := target.counts()
	for _, c := range tasks {
		if perKey[c.IdempotencyKey] != 2 {
			t.Errorf("task %s: the target saw %d requests, want 2", c.TaskID, perKey[c.IdempotencyKey])
		}
	}
}

// TestKill9OneInstanceOfTwo: on a shared store, the leases of an instance
// killed with attempts in flight are taken back by the other once its
// heartbeat has stopped for a few seconds, not when they run out (ten
// minutes here), and each task runs again with its lost attempt counted.
func TestKill9OneInstanceOfTwo(t *testing.T) {
	t.Parallel()
	for _, bc := range sharedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			b := bc.make(t)
			target := newHangFirst(t)
			args := []string{"--lease", "10m", "--attempt-timeout", "5m"}
			first := startFleet(t, b, 1, args...)[0]
			first.putPolicy("quick", quick)
			const n = 20
			var tasks []task
			for range n {
				tasks = append(tasks, first.submit(target.URL, "quick"))
			}
			target.waitInFlight(t, n)
			second := startFleet(t, b, 1, args...)[0]
			first.kill()
			killed := time.Now()
			// waitTask gives each task 30 seconds: far more than the few the
			// heartbeat takes, far less than the lease.
			succeededAfterLoss(t, second, tasks)
			t.Logf("all %d tasks in flight at the kill succeeded %v after it (killed at %v)", n, time.Since(killed).Round(time.Millisecond), killed.Format("15:04:05.000"))
			if !strings.Contains(second.log(), "took back the leases of an instance that stopped beating") {
				t.Errorf("the second instance did not say it took the leases back")
			}
		})
	}
}
