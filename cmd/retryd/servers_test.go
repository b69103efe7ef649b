package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/redis"
)

// unavailable skips t for want of a server, or fails it when
// RETRYKIT_REQUIRE_SERVERS=1 (as .ci/run sets).
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
		t.Fatal(msg + " (RETRYKIT_REQUIRE_SERVERS=1)")
	}
	t.Skip(msg)
}

func randomName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// postgresURL is the test PostgreSQL server: RETRYKIT_POSTGRES_URL, or the
// one .ci/servers starts.
func postgresURL() string {
	if u := os.Getenv("RETRYKIT_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func pgAdmin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		unavailable(t, fmt.Sprintf("PostgreSQL is not reachable at %s (%v): start it (bash .ci/servers, "+
			"or pg_ctlcluster <version> main start) or set RETRYKIT_POSTGRES_URL", postgresURL(), err))
	}
	return conn
}

// newSchema creates a PostgreSQL schema of t's own, dropped when t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	conn := pgAdmin(t)
	defer conn.Close(context.Background())
	name := "retryd_test_" + randomName()
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		// The server may still be coming back from a restart test.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for ctx.Err() == nil {
			var conn *pgx.Conn
			if conn, err = pgx.Connect(ctx, postgresURL()); err == nil {
				_, err = conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
				conn.Close(ctx)
				if err == nil {
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("drop schema %s: %v", name, err)
	})
	return name
}

// redisURL is the shared test Redis server: RETRYKIT_REDIS_URL, or the one
// .ci/servers starts.
func redisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("RETRYKIT_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	c := redisClient(t, u)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, fmt.Sprintf("Redis is not reachable at %s (%v): start it (bash .ci/servers, or "+
			"redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no) "+
			"or set RETRYKIT_REDIS_URL", u, err))
	}
	return u
}

func redisClient(t testing.TB, url string) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis URL %q: %v", url, err)
	}
	return goredis.NewClient(opts)
}

// newPrefix returns a Redis key prefix of t's own on the server at url; its
// keys are deleted (SCAN and UNLINK, never a FLUSH) when t ends.
func newPrefix(t testing.TB, url string) string {
	t.Helper()
	prefix := "retryd-test-" + randomName() + ":"
	t.Cleanup(func() {
		c := redisClient(t, url)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleaning up %s: %v", prefix, err)
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
				t.Errorf("cleaning up %s: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
	return prefix
}

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
		unavailable(t, "no redis-server binary to start a private Redis: install it (apt-get install redis-server)")
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
	c := redisClient(s.t, s.url())
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
	schema := newSchema(t)
	url := postgresURL()
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
	prefix := newPrefix(t, url)
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
			b = redisBackend(t, redisURL(t))
		}
		return func() *daemon { return startDaemonEnv(t, env, b.store, append(slices.Clone(b.flags), args...)...) }
	}
	t.Fatalf("unknown store %q (want sqlite, postgres or redis)", name)
	return nil
}
