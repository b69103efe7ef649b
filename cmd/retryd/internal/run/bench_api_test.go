package run_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

// TestMain lets this test binary be retryd. The bench's API runs start
// os.Executable() as `retryd serve …`, and under go test that is this
// binary: called so, it runs run.Main as cmd/retryd's main does. The test
// thus exercises the bench's real path (a separate process, started,
// probed and stopped with SIGTERM) against the same serve code, built
// with the same flags (-race included), without a go build of its own.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(run.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchAPI runs every API run, small, on SQLite, and checks the
// counts each reports: every task acknowledged, answered 200 by the
// target once and SUCCEEDED, none lost, no second attempt early.
func TestBenchAPI(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	args := []string{"--mode", "api", "--dir", t.TempDir(), "--clients", "4", "--tasks", "300", "--batch", "40",
		"--rate", "200", "--duration", "500ms", "--timeout", "2m"}
	err := run.Bench(context.Background(), args, func(string) string { return "" }, &out, io.Discard)
	report := out.String()
	if err != nil {
		t.Fatalf("Bench: %v\n%s", err, report)
	}
	t.Log(report)
	clean := func(n string) string {
		return `correctness: ` + n + ` acknowledged \(201\), ` + n + ` answered 200 by the target, ` + n +
			` SUCCEEDED in the API's count, 0 duplicates \(answered 200 more than once\), 0 lost`
	}
	want := map[string][]string{
		"single": {`api single: 300 tasks, one per POST /retry-tasks: \d+ tasks/s end to end`, `create latency p50 `,
			`CPU per task: retryd `, clean("300") + `\n`},
		"steady": {`api steady: 100 tasks at 200/s for 500ms: create latency p50 `, `first attempt at the target p50 `,
			clean("100") + `\n`},
		"retry": {`api retry: 100 tasks at 200/s for 500ms: `, `second-attempt lag .* p50 .*; 0 early`,
			clean("100") + `, 0 early second attempts \(over 1ms before due\), 0 without a second attempt\n`},
	}
	if _, err := os.Stat("/proc/stat"); err == nil {
		want["single"] = append(want["single"], `CPU per task: retryd .*; the machine's CPUs \d+ % busy\n`)
	}
	// The batch endpoint may not be in this build yet: then the run says
	// it is skipped, and why.
	if section(report, "batch") == "" || !strings.Contains(section(report, "batch"), "skipped") {
		want["batch"] = []string{`api batch: 300 tasks, 40 per POST /retry-tasks/batch: \d+ tasks/s end to end`, clean("300") + `\n`}
	} else {
		want["batch"] = []string{`api batch: skipped: POST /retry-tasks/batch answered 40[45]`}
	}
	for run, res := range want {
		s := section(report, run)
		for _, re := range res {
			if !regexp.MustCompile(re).MatchString(s) {
				t.Errorf("api %s: report lacks %q:\n%s", run, re, s)
			}
		}
	}
	for _, re := range []string{`(?m)^retryd bench: build .*, GOMAXPROCS \d+`, `(?m)^load average before: `, `(?m)^load average after: `,
		`(?m)^store: sqlite, a new file per run .*; durability: WAL, synchronous=FULL`} {
		if !regexp.MustCompile(re).MatchString(report) {
			t.Errorf("report lacks %q:\n%s", re, report)
		}
	}
	if strings.Contains(report, "loop ") {
		t.Errorf("--mode api made loop runs:\n%s", report)
	}
}

// section is the part of report about the API run name: its line and the
// indented lines after it.
func section(report, name string) string {
	m := regexp.MustCompile(`(?m)^api ` + name + `:.*\n(  .*\n)*`).FindString(report)
	return m
}

// TestBenchAPIClients: the single run works the same with either HTTP
// client, and the report names the one it used.
func TestBenchAPIClients(t *testing.T) {
	t.Parallel()
	for _, client := range []string{"lean", "net/http"} {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			args := []string{"--mode", "api", "--runs", "single", "--dir", t.TempDir(), "--clients", "3", "--tasks", "60",
				"--client", client, "--timeout", "2m"}
			if err := run.Bench(context.Background(), args, func(string) string { return "" }, &out, io.Discard); err != nil {
				t.Fatalf("Bench: %v\n%s", err, out.String())
			}
			for _, re := range []string{`api runs: 3 clients \(` + regexp.QuoteMeta(client) + `\), each one keep-alive connection`,
				`correctness: 60 acknowledged \(201\), 60 answered 200 by the target, 60 SUCCEEDED`} {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("report lacks %q:\n%s", re, out.String())
				}
			}
		})
	}
}
