package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRun runs a small measurement of each system and checks the report:
// every task reached the target once and the system recorded it done. The
// servers are the ones .ci/servers starts; without them the test skips,
// except when RETRYKIT_REQUIRE_SERVERS=1 (CI).
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ system, flag, url, addr string }{
		{"river", "--pg", envOr("RETRYKIT_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "127.0.0.1:5432"},
		{"asynq", "--redis", "127.0.0.1:6379", "127.0.0.1:6379"},
	} {
		t.Run(tc.system, func(t *testing.T) {
			t.Parallel()
			if c, err := net.DialTimeout("tcp", tc.addr, time.Second); err != nil {
				if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
					t.Fatalf("no server at %s (RETRYKIT_REQUIRE_SERVERS=1): %v", tc.addr, err)
				}
				t.Skipf("no server at %s: %v", tc.addr, err)
			} else {
				c.Close()
			}
			var out bytes.Buffer
			args := []string{"--system", tc.system, tc.flag, tc.url, "--tasks", "200", "--clients", "4", "--workers", "16", "--timeout", "2m"}
			if err := run(context.Background(), args, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, re := range []string{
				`^` + tc.system + `: 200 tasks, one insert each from 4 clients: \d+ tasks/s end to end`,
				`insert latency p50 `,
				`correctness: 200 inserted, 200 answered 200 by the target, 0 duplicates, 0 lost\n`,
			} {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("report lacks %q:\n%s", re, out.String())
				}
			}
		})
	}
}

func TestRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--system", "sidekiq"}, {"--tasks", "0"}, {"--clients", "-1"}, {"--nope"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%s) = nil, want an error", strings.Join(args, " "))
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
