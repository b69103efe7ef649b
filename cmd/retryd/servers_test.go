package main_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/servertest"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// redisServer is a redis-server of the test's own on a free loopback port,
// persisting every write to an append-only file in dir (appendfsync
// always), so that it can be restarted without losing anything. It is
// stopped by its PID when the test ends.
type redisServer struct {
	t     testing.TB
	port  int
	dir   string
	fsync string // appendfsync: always, or everysec for a test of what it loses
	cmd   *exec.Cmd
	done  chan struct{}
}

func startRedisServer(t testing.TB) *redisServer {
	t.Helper()
	return startRedisServerFsync(t, "always")
}

// startRedisServerFsync is startRedisServer with appendfsync fsync.
func startRedisServerFsync(t testing.TB, fsync string) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		servertest.Missing(t, "no redis-server binary to start a private Redis: install it (apt-get install redis-server)")
	}
	s := &redisServer{t: t, port: privatePort(t), dir: t.TempDir(), fsync: fsync}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// start runs redis-server on s.port and s.dir and waits until it answers.
func (s *redisServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--dir", s.dir, "--appendonly", "yes", "--appendfsync", s.fsync, "--save", "",
		"--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	c := redistest.Client(s.t, s.url())
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d did not answer", s.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A restart binds the port again: make sure the server answering is
	// this one, not another test's that took the port while it was free.
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		s.t.Fatalf("redis-server on port %d: INFO: %v", s.port, err)
	}
	if want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid); !strings.Contains(info, want+"\r\n") && !strings.Contains(info, want+"\n") {
		s.t.Fatalf("port %d is answered by another redis-server than the one started (pid %d): another test took the port", s.port, s.cmd.Process.Pid)
	}
}

// privatePort picks a free port for a private server, below the kernel's
// ephemeral range (32768 and up on Linux), at random: a server that is
// restarted on its port leaves it free for a moment, and a port picked by
// listening on :0 (as other tests' servers and retryd instances are) could
// be handed out again in that moment.
func privatePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		var b [2]byte
		_, _ = rand.Read(b[:])
		port := 20000 + (int(b[0])<<8|int(b[1]))%10000
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no free port for a private server in 20000–29999")
	return 0
}

// shutdown stops the server as an operator would (redis-cli shutdown): it
// syncs its append-only file and exits.
func (s *redisServer) shutdown() {
	s.t.Helper()
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(s.port), "shutdown").CombinedOutput()
	if err != nil && len(out) > 0 {
		s.t.Logf("redis-cli shutdown: %v %s", err, out) // the connection closing is its normal answer
	}
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.t.Fatalf("redis-server on port %d did not shut down", s.port)
	}
	s.cmd = nil
}

// backend is one kind of shared store as the tests use it: the --store
// value and flags that put retryd instances on one fresh schema or prefix,
// and a store.Store on the same, for the test's own checks.
type backend struct {
	name  string
	store string
	flags []string
	open  func(t testing.TB) store.Store
}

// quiet is a logger for the test's own stores.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// postgresBackend is a fresh schema on the test server.
func postgresBackend(t testing.TB) backend {
	t.Helper()
	schema := pgtest.Schema(t, "retryd_test_")
	url := pgtest.URL()
	return backend{
		name:  "postgres",
		store: url,
		flags: []string{"--schema", schema},
		open: func(t testing.TB) store.Store {
			st, err := postgres.Open(context.Background(), url, postgres.WithSchema(schema), postgres.WithLogger(quiet()))
			if err != nil {
				t.Fatalf("open the store: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// redisBackend is a fresh prefix on the Redis server at url.
func redisBackend(t testing.TB, url string) backend {
	t.Helper()
	prefix := redistest.Prefix(t, url)
	return backend{
		name:  "redis",
		store: url,
		flags: []string{"--prefix", prefix},
		open: func(t testing.TB) store.Store {
			st, err := redis.Open(context.Background(), url, redis.WithPrefix(prefix), redis.WithLogger(quiet()))
			if err != nil {
				t.Fatalf("open the store: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// storeStarter returns what starts a retryd, with env added to its
// environment and args, on one fresh store of the kind name (sqlite,
// postgres, redis): the same store at each call, so that a restarted
// retryd finds its predecessor's tasks. An unknown name fails t.
func storeStarter(t *testing.T, name string, env []string, args ...string) func() *daemon {
	t.Helper()
	switch name {
	case "sqlite":
		db := newDB(t)
		return func() *daemon { return startDaemonEnv(t, env, db, args...) }
	case "postgres", "redis":
		var b backend
		if name == "postgres" {
			b = postgresBackend(t)
		} else {
			b = redisBackend(t, redistest.URL(t))
		}
		return func() *daemon { return startDaemonEnv(t, env, b.store, append(slices.Clone(b.flags), args...)...) }
	}
	t.Fatalf("unknown store %q (want sqlite, postgres or redis)", name)
	return nil
}
