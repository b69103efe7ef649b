package run_test

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

// TestBenchBodySize runs the single API run with --body-size bodies over
// the blob threshold, with retryd's default blob store and with --blobs
// off, and checks that every body reached the target whole and where the
// store kept it: in blobs, one a task (each body is distinct), or in
// the database.
func TestBenchBodySize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		blobs string
		want  []string
	}{
		{"", []string{`retryd --blobs \(its default\)`, `blobs 2000000 bytes in 20 files \(100000 a task\)`}},
		{"off", []string{`retryd --blobs off`, `blobs 0 bytes in 0 files`, `database and WAL \d{7,} bytes \(1\d{5} a task\)`}},
	} {
		t.Run("blobs="+tc.blobs, func(t *testing.T) {
			t.Parallel()
			args := []string{"--mode", "api", "--runs", "single", "--dir", t.TempDir(), "--clients", "4", "--tasks", "20",
				"--body-size", "100000", "--timeout", "2m"}
			if tc.blobs != "" {
				args = append(args, "--blobs", tc.blobs)
			}
			var out bytes.Buffer
			err := run.Bench(context.Background(), args, func(string) string { return "" }, &out, io.Discard)
			report := out.String()
			if err != nil {
				t.Fatalf("Bench: %v\n%s", err, report)
			}
			for _, re := range append(tc.want, `api bodies: 100000 bytes each`, `correctness: 20 acknowledged \(201\), 20 answered 200`,
				`bodies: the target read 2000000 bytes in 20 requests, 100000 each as sent`, `store at rest \(after retryd stopped\): `) {
				if !regexp.MustCompile(re).MatchString(report) {
					t.Errorf("report lacks %q:\n%s", re, report)
				}
			}
		})
	}
}

// TestBenchBodySizeFlag checks that --body-size takes sizes and refuses
// what is not one.
func TestBenchBodySizeFlag(t *testing.T) {
	for _, bad := range []string{"0", "-1", "1XB", "lots"} {
		var stderr bytes.Buffer
		err := run.Bench(context.Background(), []string{"--body-size", bad}, func(string) string { return "" }, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), "not a size") {
			t.Errorf("--body-size %s: got %v, %q; want a usage error saying it is not a size", bad, err, stderr.String())
		}
	}
}
