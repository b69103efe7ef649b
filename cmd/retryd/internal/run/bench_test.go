package run_test

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

func TestBenchReports(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"lean", "net/http"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			args := []string{"--mode", "loop", "--dir", t.TempDir(), "--tasks", "20", "--attempts", "3", "--rate", "100", "--duration", "300ms",
				"--ahead", "100ms", "--target", target}
			if err := run.Bench(context.Background(), args, func(string) string { return "" }, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				`target: ` + regexp.QuoteMeta(target) + `, on 127\.0\.0\.1`,
				`loop throughput: 20 tasks created in .*; 60 attempts \(3 per task, .*\) in .* = \d+ attempts/s`,
				`loop lag: 30 tasks, 100 due per second for 300ms, each due 100ms after creation: dispatch lag \(attempt start - due time\) p50 .*, p99 .*, max .*`,
			} {
				if !regexp.MustCompile(want).MatchString(out.String()) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
			if regexp.MustCompile(`(?m)^api `).MatchString(out.String()) {
				t.Errorf("--mode loop made API runs:\n%s", out.String())
			}
		})
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--tasks", "0"}, {"--rate", "-1"}, {"--nope"}, {"--target", "nginx"}, {"--client", "curl"}, {"--mode", "fast"},
		{"--clients", "0"}, {"--batch", "0"}, {"--batch", "1001"}, {"--runs", "single,bulk"},
		{"--store", "mysql://127.0.0.1/x"}, {"--store", "./my.db"}, {"--timeout", "0s"}, {"extra"},
	} {
		if err := run.Bench(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
			t.Errorf("Bench(%q) = nil, want an error", args)
		}
	}
}
