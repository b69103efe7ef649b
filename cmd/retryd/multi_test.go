package main_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// sharedBackends are the stores several instances can share, each in a
// schema or prefix of the test's own. A missing server skips its case (or
// fails it under RETRYKIT_REQUIRE_SERVERS=1).
func sharedBackends() []struct {
	name string
	make func(t *testing.T) backend
} {
	return []struct {
		name string
		make func(t *testing.T) backend
	}{
		{"postgres", func(t *testing.T) backend { return postgresBackend(t) }},
		{"redis", func(t *testing.T) backend { return redisBackend(t, redistest.URL(t)) }},
	}
}

// fleetTasks is how many tasks TestSeveralInstances runs: the issue's
// 10,000 under RETRYKIT_LONG=1, fewer by default to keep the package quick
// on a shared machine.
func fleetTasks() int {
	if os.Getenv("RETRYKIT_LONG") == "1" {
		return 10000
	}
	return 2000
}

// Three instances share one store and a burst of tasks created through all
// three APIs: every task succeeds, every instance takes part, and since
// nothing crashes no Idempotency-Key reaches the target twice.
func TestSeveralInstances(t *testing.T) {
	t.Parallel()
	for _, bc := range sharedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.make(t)
			st := b.open(t)
			target := newFlaky(t)
			// A lease far longer than the run: an expiry without a
			// crash would be a duplicate this test must not excuse.
			ds := startFleet(t, b, 3, "--lease", "2m", "--attempt-timeout", "10s")
			ds[0].putPolicy("once", map[string]any{"backoff": "FIXED", "initialDelayMs": 10, "jitterType": "NONE", "maxAttempts": 3})
			n := fleetTasks()

			began := time.Now()
			tasks := createMany(t, ds, target.URL+"/fail/0", "once", n)
			createdIn := time.Since(began)
			waitSucceeded(t, st, int64(n), 3*time.Minute)
			t.Logf("%s: %d tasks created through 3 instances in %v, all SUCCEEDED after %v",
				b.name, n, createdIn.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

			twice := 0
			for _, c := range tasks {
				switch got := target.received(c.key); {
				case got == 0:
					t.Errorf("task %s SUCCEEDED but the target never saw its key", c.id)
				case got > 1:
					twice++
				}
			}
			if twice > 0 {
				t.Errorf("%d of %d keys reached the target more than once without a crash", twice, n)
			}
			if got := len(target.requests("")); got != n {
				t.Errorf("target answered %d requests, want %d", got, n)
			}
			for i, d := range ds {
				if got := attemptsMade(t, d); got == 0 {
					t.Errorf("instance %d made no attempt: the store was not shared", i)
				}
			}
		})
	}
}

// kill -9 of one of three instances with attempts in flight: the others
// reclaim its tasks once their leases expire, every task succeeds, only
// tasks leased at the kill are reclaimed, and the only keys the target
// sees twice are those of reclaimed tasks (attempts the kill cut off, or
// whose outcome it kept from the store).
func TestKill9OneOfThreeInstances(t *testing.T) {
	t.Parallel()
	for _, bc := range sharedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.make(t)
			st := b.open(t)
			target := newFlaky(t)
			const workers, n = 16, 400
			ds := startFleet(t, b, 3, "--lease", "2s", "--attempt-timeout", "1s", "--workers", strconv.Itoa(workers))
			ds[0].putPolicy("once", map[string]any{"backoff": "FIXED", "initialDelayMs": 10, "jitterType": "NONE", "maxAttempts": 5})
			// Every attempt takes 300ms, so each instance has its
			// workers busy when one is killed.
			tasks := createMany(t, ds, target.URL+"/slow/0", "once", n)
			deadline := time.Now().Add(30 * time.Second)
			for len(target.requests("")) < n/4 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			// Freeze the instance mid-attempt: when the target holds more
			// requests sent in the last 150ms than the other two
			// instances have workers, at least one is this instance's,
			// with 150ms to go. (Frozen at the end of a round of
			// attempts, between recording them and claiming the next, it
			// would hold no lease, and its death would prove nothing.)
			for target.holding(150*time.Millisecond) <= 2*workers {
				if time.Now().After(deadline) {
					t.Fatalf("the target never held more than %d fresh requests at once", 2*workers)
				}
				time.Sleep(time.Millisecond)
			}
			// Note every lease held once it is frozen, then kill it:
			// whatever is reclaimed later must be among them.
			if err := ds[0].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // statements already sent finish
			leased := map[string]bool{}
			for _, task := range allTasks(t, st) {
				if task.Status == store.InFlight {
					leased[task.ID] = true
				}
			}
			killedAt := time.Now()
			ds[0].kill()
			waitSucceeded(t, st, n, 30*time.Second) // well under the 1m periodic resync
			t.Logf("%s: all %d SUCCEEDED %v after the kill", b.name, n, time.Since(killedAt).Round(time.Millisecond))

			byID := map[string]*store.Task{}
			for _, task := range allTasks(t, st) {
				byID[task.ID] = task
			}
			reclaimed, twice := 0, 0
			for _, c := range tasks {
				task := byID[c.id]
				if task == nil {
					t.Fatalf("task %s is gone", c.id)
				}
				log, _, err := st.AttemptList(context.Background(), task.Tenant, c.id, store.Page{Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				lost := 0
				for _, a := range log {
					if strings.Contains(a.ErrorMessage, store.LeaseExpiredMessage) {
						lost++
					}
				}
				if lost > 0 {
					reclaimed++
					if !leased[c.id] {
						t.Errorf("task %s was reclaimed but held no lease when the instance died", c.id)
					}
				}
				got := target.received(c.key)
				if got > len(log) {
					t.Errorf("task %s: the target received %d requests, the attempt log has %d", c.id, got, len(log))
				}
				if got > 1 {
					twice++
					if lost == 0 {
						t.Errorf("task %s: key sent %d times but no lease was lost: a duplicate without a crash", c.id, got)
					}
				}
			}
			if reclaimed == 0 {
				t.Fatal("no task was reclaimed: the kill cut off no attempt, so the test proved nothing")
			}
			t.Logf("%s: %d leases held at the kill (all instances), %d tasks reclaimed, %d keys sent twice",
				b.name, len(leased), reclaimed, twice)
		})
	}
}
