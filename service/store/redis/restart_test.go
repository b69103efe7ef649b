package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// fastListen subscribes again within 100ms, so the tests wait little.
var fastListen = redis.WithListenBackoff(backoff.Policy{Kind: backoff.Exponential, Base: 10 * time.Millisecond,
	Max: 100 * time.Millisecond})

// waitUp waits until s reaches its server again.
func waitUp(t *testing.T, s *redis.Store) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := s.Ping(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not reach the server again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshot reads every task of ts as the store has it.
func snapshot(t *testing.T, s *redis.Store, ts []*store.Task) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tk := range ts {
		got, err := s.TaskGet(context.Background(), tk.Tenant, tk.ID)
		if err != nil {
			t.Fatalf("TaskGet(%s) = %v", tk.ID, err)
		}
		out[tk.ID] = fmt.Sprintf("%s attempt %d version %d next %v lease %v", got.Status, got.AttemptNumber,
			got.Version, got.NextAttemptAt, got.LeaseUntil)
	}
	return out
}

// A Redis with an append-only file that is killed (SIGKILL) and started
// again loses nothing the store acknowledged, with either fsync policy the
// package documentation recommends; the store reaches it again by itself,
// sends the scripts the new process lacks, and Listen subscribes again.
func TestServerKilled(t *testing.T) {
	t.Parallel()
	for _, fsync := range []string{"always", "everysec"} {
		t.Run("appendfsync "+fsync, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := startServer(t, "--appendonly", "yes", "--appendfsync", fsync)
			s := closeAtEnd(t, open(t, srv.url(), "retrykit-test:", redis.WithPartitions(4), fastListen))
			wakes, _, _ := listen(t, s)
			waitSubscribed(t, srv.url(), redis.WakeChannel(s, s.Partition("acme", "p0")), 1)

			var tasks []*store.Task
			for i := range 3 {
				tasks = append(tasks, createIn(t, s, "acme", fmt.Sprint("p", i), 20, 0)...)
			}
			for range tasks {
				<-wakes
			}
			claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 30})
			if err != nil || len(claimed) != 30 {
				t.Fatalf("TaskClaim = %d tasks, %v", len(claimed), err)
			}
			for i, c := range claimed[:20] {
				status := store.Succeeded
				if i%2 == 1 {
					status = store.Pending
				}
				finishAs(t, s, c, status, now.Add(time.Second))
			}
			for range 10 {
				<-wakes
			}
			before := snapshot(t, s, tasks)

			srv.kill()
			if err := s.Ping(ctx); err == nil || errors.Is(err, store.ErrClosed) {
				t.Errorf("Ping with the server down = %v, want a connection error", err)
			}
			if _, err := s.TaskGet(ctx, "acme", tasks[0].ID); err == nil || errors.Is(err, store.ErrNotFound) {
				t.Errorf("TaskGet with the server down = %v, want a connection error", err)
			}
			srv.start()
			waitUp(t, s)
			// Wake-ups published before Listen subscribes again are lost by
			// design (Pub/Sub); the store's fallback is the scheduler's resync.
			waitSubscribed(t, srv.url(), redis.WakeChannel(s, s.Partition("acme", "p0")), 1)

			after := snapshot(t, s, tasks)
			for id, b := range before {
				if after[id] != b {
					t.Errorf("task %s was %s before the kill, %s after", id, b, after[id])
				}
			}
			counts, err := s.TaskCounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := (map[store.Status]int64{store.Pending: 40, store.InFlight: 10, store.Succeeded: 10}); counts[store.Pending] != 40 ||
				counts[store.InFlight] != 10 || counts[store.Succeeded] != 10 {
				t.Errorf("counts after the restart = %v, want %v", counts, want)
			}
			again, err := s.TaskClaim(ctx, store.ClaimParams{Now: now.Add(2 * time.Second), Lease: time.Minute, Limit: 100})
			if err != nil || len(again) != 40 {
				t.Errorf("TaskClaim after the restart = %d tasks, %v; want the 40 pending", len(again), err)
			}
			tk := createIn(t, s, "acme", "p0", 1, time.Hour)[0]
			expectWake(t, wakes, tk.ID, t0.Add(time.Hour))
		})
	}
}

// Open warns about a server that would lose acknowledged changes.
func TestDurabilityWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // in the log; "" for no warning
	}{
		{name: "no AOF", args: []string{"--appendonly", "no"}, want: "keeps no append-only file"},
		{name: "AOF never synced", args: []string{"--appendonly", "yes", "--appendfsync", "no"}, want: "never synced"},
		{name: "AOF synced every second", args: []string{"--appendonly", "yes", "--appendfsync", "everysec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, tt.args...)
			logs := &lockedBuffer{}
			closeAtEnd(t, open(t, srv.url(), "retrykit-test:", redis.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))))
			got := logs.String()
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("log = %q, want %q", got, tt.want)
			}
		})
	}
}

// The shared server restarted as this repository runs it, without
// persistence: the store reaches it again and works, Listen subscribes
// again, and what it held is gone (see the package documentation). It
// disturbs every other user of the server, so it runs only with
// RETRYKIT_DISRUPTIVE=1.
func TestSharedServerRestart(t *testing.T) {
	if os.Getenv("RETRYKIT_DISRUPTIVE") != "1" {
		t.Skip("restarts the shared Redis on 127.0.0.1:6379: set RETRYKIT_DISRUPTIVE=1 to run it")
	}
	url := redistest.URL(t)
	if !strings.Contains(url, "127.0.0.1:6379") {
		t.Skipf("RETRYKIT_REDIS_URL=%s is not the server this test restarts", url)
	}
	ctx := context.Background()
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithPartitions(4), fastListen))
	wakes, _, _ := listen(t, s)
	waitSubscribed(t, url, redis.WakeChannel(s, s.Partition("acme", "p")), 1)
	lost := createIn(t, s, "acme", "p", 1, 0)[0]
	expectWake(t, wakes, lost.ID, t0)

	if out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave").CombinedOutput(); err != nil {
		t.Logf("redis-cli shutdown nosave: %v %s", err, out)
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping with the server down = nil, want an error")
	}
	if out, err := exec.Command("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", "6379",
		"--save", "", "--appendonly", "no").CombinedOutput(); err != nil {
		t.Fatalf("redis-server: %v %s", err, out)
	}
	waitUp(t, s)

	if _, err := s.TaskGet(ctx, "acme", lost.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TaskGet of a task created before the restart = %v, want ErrNotFound: the server kept no file", err)
	}
	waitSubscribed(t, url, redis.WakeChannel(s, s.Partition("acme", "p")), 1)
	tk := createIn(t, s, "acme", "p", 1, time.Second)[0]
	expectWake(t, wakes, tk.ID, t0.Add(time.Second))
	c := claimOne(t, s, tk.ID, now)
	finishAs(t, s, c, store.Succeeded, time.Time{})
}
