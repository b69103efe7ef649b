package redis_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrykit/retry/service/servertest"
)

// server is a redis-server of a test's own, on a free loopback port, with
// its files in a temporary directory. It is stopped (by its PID) when the
// test ends.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// startServer starts redis-server with args (beyond port and directory).
// Without the redis-server binary, t is skipped, or fails when
// RETRYKIT_REQUIRE_SERVERS=1.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		servertest.Missing(t, "no redis-server binary to start a private server: install redis-server (apt-get install redis-server)")
	}
	s := &server{t: t, port: freePort(t), dir: t.TempDir(), args: args}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// freePort returns a loopback port that is free, and so is the port 10000
// above it (a cluster node's bus).
func freePort(t testing.TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err == nil {
			bus.Close()
			return port
		}
	}
	t.Fatal("no free port pair")
	return 0
}

func (s *server) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

func (s *server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--daemonize", "no", "--logfile", "server.log"}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d did not answer", s.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill kills the server with SIGKILL, as a crash would, and waits for it.
func (s *server) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func (s *server) stop() { s.kill() }

// client returns a client of the server (of its node, on a cluster).
func (s *server) client() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(s.port), MaxRetries: -1})
}
