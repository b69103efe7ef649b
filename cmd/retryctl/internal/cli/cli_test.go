package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

const token = "cli-test-token-0123456789"

// server is a real retryd API over a real SQLite file, with one tenant.
type server struct {
	url   string
	store *sqlite.Store
}

func setup(t *testing.T) *server {
	return setupWith(t, false)
}

// setupWith is setup, with an embedded blob store when blobs is set, and
// tenant acme allowed bodyRefs under s3://payloads/acme/. It has a secrets
// key, as retryd --secrets-key-file gives, so that it keeps destinations.
func setupWith(t *testing.T, blobs bool) *server {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys, err := secrets.NewKeyring(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{Store: st, Keys: keys, DestinationBounds: destination.Bounds{MaxTimeout: 30 * time.Second}}
	refs := ""
	if blobs {
		b, err := disk.Open(filepath.Join(t.TempDir(), "retryd.blobs"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		cfg.Blobs, refs = b, " s3://payloads/acme/"
	}
	tokens, err := api.ParseTokens(strings.NewReader(token + " acme" + refs + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = tokens
	h, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{url: srv.URL, store: st}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs retryctl with RETRYD_URL and RETRYD_TOKEN set for s, plus env.
func (s *server) run(t *testing.T, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	vars := map[string]string{"RETRYD_URL": s.url, "RETRYD_TOKEN": token}
	for k, v := range env {
		vars[k] = v
	}
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Env{
		Getenv: func(k string) string { return vars[k] },
		Stdin:  strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
	})
	return result{code, out.String(), errOut.String()}
}

// ok runs retryctl and fails the test unless it exits 0.
func (s *server) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := s.run(t, "", nil, args...)
	if r.code != cli.ExitOK {
		t.Fatalf("retryctl %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs retryctl with --json and decodes its output.
func (s *server) okJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out := s.ok(t, append(args, "--json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("retryctl %v --json printed %q: %v", args, out, err)
	}
	return m
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	s := setup(t)
	out := s.ok(t, "policies", "put", "webhooks", "--spec", `{"backoff":"LINEAR","initialDelayMs":250,"maxAttempts":4}`)
	wantContains(t, "put output", out, "registered policy webhooks", "LINEAR", "250ms", "4")

	out = s.ok(t, "policies", "put", "webhooks", "--spec", `{"maxAttempts":4,"backoff":"LINEAR","initialDelayMs":250}`)
	wantContains(t, "repeat output", out, "already registered")

	// Settings from stdin, in the shape "policies get --json" prints.
	got := s.okJSON(t, "policies", "get", "webhooks")
	b, _ := json.Marshal(got)
	if r := s.run(t, string(b), nil, "policies", "put", "webhooks", "--file", "-"); r.code != 0 || !strings.Contains(r.stdout, "already registered") {
		t.Errorf("put from get's JSON: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if got["policyId"] != "webhooks" || got["backoff"] != "LINEAR" || got["maxAttempts"] != 4.0 {
		t.Errorf("policies get --json = %v", got)
	}

	r := s.run(t, "", nil, "policies", "put", "webhooks", "--spec", `{"maxAttempts":9}`)
	if r.code != cli.ExitError {
		t.Errorf("conflicting put: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "conflict stderr", r.stderr, "409", "conflict", "policyId")

	r = s.run(t, "", nil, "policies", "put", "bad", "--spec", `{"maxAttempts":0,"jitterType":"WILD"}`)
	if r.code != cli.ExitError {
		t.Errorf("invalid put: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "invalid stderr", r.stderr, "maxAttempts", "jitterType")

	s.ok(t, "policies", "put", "defaults")
	out = s.ok(t, "policies", "list")
	wantContains(t, "list output", out, "POLICY", "defaults", "EXPONENTIAL", "webhooks", "LINEAR")
	if strings.Contains(out, "bad") {
		t.Errorf("a refused policy is listed:\n%s", out)
	}
	r = s.run(t, "", nil, "policies", "get", "nope")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "404") {
		t.Errorf("get unknown: exit %d, stderr %s", r.code, r.stderr)
	}
}

// A policy without delays or cap prints as such, not as the Go values that
// say so (backoff.None).
func TestPolicyWithoutDelaysOrCap(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "instant", "--spec", `{"backoff":"FIXED","initialDelayMs":0,"maxDelayMs":0,"jitterType":"NONE"}`)
	out := s.ok(t, "policies", "get", "instant")
	wantContains(t, "get output", out, "Initial delay:", "0s", "Max delay:", "none")
	if strings.Contains(out, "-1ns") {
		t.Errorf("get output shows backoff.None as -1ns:\n%s", out)
	}
	got := s.okJSON(t, "policies", "get", "instant")
	if got["initialDelayMs"] != 0.0 || got["maxDelayMs"] != 0.0 {
		t.Errorf("policies get --json = %v, want initialDelayMs and maxDelayMs 0", got)
	}
}

func TestTasks(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p", "--spec", `{"maxAttempts":2}`)

	out := s.ok(t, "tasks", "submit", "--policy", "p", "--target", "http://127.0.0.1:9/hook",
		"-H", "X-Trace: abc", "--body", `{"n":1}`, "--idempotency-key", "order-1")
	wantContains(t, "submit output", out, "PENDING", "POST http://127.0.0.1:9/hook", "X-Trace: abc", "order-1")
	task := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://127.0.0.1:9/hook",
		"-H", "X-Trace: abc", "--body", `{"n":1}`, "--idempotency-key", "order-1")
	id := task["taskId"].(string)
	out = s.ok(t, "tasks", "submit", "--policy", "p", "--target", "http://127.0.0.1:9/hook",
		"-H", "X-Trace: abc", "--body", `{"n":1}`, "--idempotency-key", "order-1")
	wantContains(t, "repeat output", out, "already exists", id)

	// Flags may follow the argument.
	if got := s.okJSON(t, "tasks", "get", id); got["taskId"] != id || got["body"] != `{"n":1}` {
		t.Errorf("tasks get --json = %v", got)
	}

	// A body that is not UTF-8 travels as bodyBase64.
	bin := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(bin, []byte{0xff, 0x00, 0x01}, 0o600); err != nil {
		t.Fatal(err)
	}
	binTask := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://h/b", "--body-file", bin, "--method", "put")
	if binTask["bodyBase64"] != "/wAB" || binTask["method"] != "PUT" {
		t.Errorf("binary task = %v", binTask)
	}

	out = s.ok(t, "tasks", "list")
	wantContains(t, "list output", out, "TASK", "STATUS", id, binTask["taskId"].(string), "PENDING")
	page := s.okJSON(t, "tasks", "list", "--limit", "1")
	next, _ := page["nextPageToken"].(string)
	if len(page["items"].([]any)) != 1 || next == "" {
		t.Fatalf("first page = %v, want 1 item and a token", page)
	}
	out = s.ok(t, "tasks", "list", "--limit", "1")
	wantContains(t, "paged list", out, "more: --page-token "+next)
	page = s.okJSON(t, "tasks", "list", "--limit", "1", "--page-token", next)
	if items := page["items"].([]any); len(items) != 1 || items[0].(map[string]any)["taskId"] != id {
		t.Errorf("second page = %v, want task %s", page, id)
	}
	if got := s.okJSON(t, "tasks", "list", "--status", "succeeded,failed"); len(got["items"].([]any)) != 0 {
		t.Errorf("SUCCEEDED/FAILED tasks = %v, want none", got["items"])
	}

	out = s.ok(t, "tasks", "cancel", binTask["taskId"].(string))
	wantContains(t, "cancel output", out, "CANCELLED")
	r := s.run(t, "", nil, "tasks", "cancel", binTask["taskId"].(string))
	if r.code != cli.ExitError {
		t.Errorf("second cancel: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "second cancel stderr", r.stderr, "409", "CANCELLED")

	r = s.run(t, "", nil, "tasks", "submit", "--policy", "p", "--target", "ftp://h/")
	if r.code != cli.ExitError {
		t.Errorf("submit ftp: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "submit ftp stderr", r.stderr, "400", "targetUrl")
}

// fail records one failed attempt through the store, as the scheduler
// would, leaving the task in status.
func fail(t *testing.T, st store.Store, id string, status store.Status) {
	t.Helper()
	now := time.Now()
	ts, err := st.TaskClaim(context.Background(), store.ClaimParams{Now: now, Lease: time.Minute, Limit: 1, IDs: []string{id}})
	if err != nil || len(ts) != 1 {
		t.Fatalf("TaskClaim: %v %v", ts, err)
	}
	errs, err := st.TaskFinish(context.Background(), []store.Finish{{
		TaskID: ts[0].ID, Version: ts[0].Version,
		Attempt: store.Attempt{AttemptNumber: ts[0].AttemptNumber, StartedAt: now, Duration: 7 * time.Millisecond, ResponseStatus: 502, ErrorMessage: "502 Bad Gateway"},
		Status:  status, NextAttemptAt: now, LastError: "502 Bad Gateway", LastStatus: 502, Now: now,
	}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish: %v %v", errs, err)
	}
}

func TestAttemptsDeadLettersRedrive(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p", "--spec", `{"maxAttempts":2}`)
	id := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://h/x")["taskId"].(string)
	fail(t, s.store, id, store.Pending)
	fail(t, s.store, id, store.Exhausted)

	out := s.ok(t, "tasks", "attempts", id)
	wantContains(t, "attempts output", out, "#", "DURATION", "7ms", "502", "502 Bad Gateway")
	if n := strings.Count(out, "502 Bad Gateway"); n != 2 {
		t.Errorf("attempts output has %d attempts, want 2:\n%s", n, out)
	}
	out = s.ok(t, "dead-letters", "list")
	wantContains(t, "dead letters", out, id, "EXHAUSTED")
	out = s.ok(t, "dead-letters", "redrive", id)
	wantContains(t, "redrive output", out, "PENDING")
	if got := s.okJSON(t, "dead-letters", "list", "--policy", "p"); len(got["items"].([]any)) != 0 {
		t.Errorf("dead letters after redrive = %v, want none", got["items"])
	}
	if r := s.run(t, "", nil, "dead-letters", "redrive", id); r.code != cli.ExitError || !strings.Contains(r.stderr, "409") {
		t.Errorf("second redrive: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestEnvironmentAndFlags(t *testing.T) {
	t.Parallel()
	s := setup(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		err  string
	}{
		{"token from the environment", nil, []string{"policies", "list"}, cli.ExitOK, ""},
		{"no token", map[string]string{"RETRYD_TOKEN": ""}, []string{"policies", "list"}, cli.ExitError, "401"},
		{"--token overrides the environment", map[string]string{"RETRYD_TOKEN": ""}, []string{"--token", token, "policies", "list"}, cli.ExitOK, ""},
		{"--token after the command", map[string]string{"RETRYD_TOKEN": "wrong-token-0123456789"}, []string{"policies", "list", "--token", token}, cli.ExitOK, ""},
		{"--url overrides the environment", map[string]string{"RETRYD_URL": "http://127.0.0.1:1"}, []string{"--url", s.url, "policies", "list"}, cli.ExitOK, ""},
		{"nothing listening", map[string]string{"RETRYD_URL": "http://127.0.0.1:1"}, []string{"policies", "list"}, cli.ExitError, "connect"},
		{"no command", nil, nil, cli.ExitUsage, "Usage"},
		{"no verb", nil, []string{"tasks"}, cli.ExitUsage, "subcommand"},
		{"unknown command", nil, []string{"tasks", "explode"}, cli.ExitUsage, "unknown command"},
		{"missing argument", nil, []string{"tasks", "get"}, cli.ExitUsage, "TASK_ID"},
		{"extra argument", nil, []string{"tasks", "get", "a", "b"}, cli.ExitUsage, "got 2"},
		{"unknown flag", nil, []string{"tasks", "list", "--colour"}, cli.ExitUsage, "colour"},
		{"submit without target", nil, []string{"tasks", "submit", "--policy", "p"}, cli.ExitUsage, "--target is required"},
		{"bad header flag", nil, []string{"tasks", "submit", "-H", "nocolon"}, cli.ExitUsage, "Name: value"},
		{"body and body-file", nil, []string{"tasks", "submit", "--policy", "p", "--target", "http://h/", "--body", "a", "--body-file", "-"}, cli.ExitUsage, "one of"},
		{"body and body-ref", nil, []string{"tasks", "submit", "--policy", "p", "--target", "http://h/", "--body", "a", "--body-ref", "s3://b/k"}, cli.ExitUsage, "one of"},
		{"spec and file", nil, []string{"policies", "put", "x", "--spec", "{}", "--file", "-"}, cli.ExitUsage, "not both"},
		{"spec names another policy", nil, []string{"policies", "put", "x", "--spec", `{"policyId":"y"}`}, cli.ExitUsage, `"y"`},
		{"spec not JSON", nil, []string{"policies", "put", "x", "--spec", "{"}, cli.ExitError, "policy settings"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.run(t, "", tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			wantContains(t, "stderr", r.stderr, tc.err)
		})
	}
	for _, help := range [][]string{{"help"}, {"-h"}, {"tasks", "list", "-h"}} {
		if r := s.run(t, "", nil, help...); r.code != cli.ExitOK || !strings.Contains(r.stdout, "Usage") {
			t.Errorf("%v: exit %d, stdout %q", help, r.code, r.stdout)
		}
	}
}

// TestKafkaReplayCommand checks "kafka replay -h" and its refusal without a topic.
func TestKafkaReplayCommand(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	env := cli.Env{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
	if code := cli.Run(context.Background(), []string{"kafka", "replay", "-h"}, env); code != cli.ExitOK || !strings.Contains(out.String(), "-topic") {
		t.Errorf("kafka replay -h: exit %d, output %q; want 0 and the flags", code, out.String())
	}
	if code := cli.Run(context.Background(), []string{"kafka", "replay"}, env); code != cli.ExitError || !strings.Contains(errOut.String(), "-topic is required") {
		t.Errorf("kafka replay without -topic: exit %d, stderr %q", code, errOut.String())
	}
}

func TestSubmitFile(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p")
	later := time.Now().Add(time.Hour).UnixMilli()
	lines := []string{
		`{"targetUrl":"http://h/1","policyId":"p","idempotencyKey":"a","body":"one"}`,
		``,
		`{"targetUrl":"ftp://h/3","policyId":"p"}`,
		`oops`,
		`{"targetUrl":"http://h/1","policyId":"p","idempotencyKey":"a","body":"one"}`,
		`{"targetUrl":"http://h/6","policyId":"p","retries":3}`,
		`{"targetUrl":"http://h/1","policyId":"p","idempotencyKey":"a","body":"other"}`,
		fmt.Sprintf(`{"targetUrl":"http://h/8","policyId":"p","notBefore":%d}`, later),
		`{"targetUrl":"http://h/9","policyId":"nope"}`,
	}
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\r\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, "", nil, "tasks", "submit", "--file", file)
	if r.code != cli.ExitError {
		t.Errorf("exit %d, want %d when lines are refused\nstdout: %s\nstderr: %s", r.code, cli.ExitError, r.stdout, r.stderr)
	}
	wantContains(t, "stdout", r.stdout, "2 created, 1 repeated, 5 refused",
		"line 3: retryd: 400 invalid_request (targetUrl)",
		"line 4: not a JSON task object",
		`line 6: not a task object: unknown field "retries"`,
		"line 7: retryd: 409 conflict (idempotencyKey)",
		"line 9: retryd: 400 unknown_policy (policyId)")
	if strings.Contains(r.stdout, "tasks[") || strings.Contains(r.stdout, "line 2:") || strings.Contains(r.stdout, "line 1:") {
		t.Errorf("stdout names batch fields, or lines that were not refused:\n%s", r.stdout)
	}
	wantContains(t, "stderr", r.stderr, "5 of 8 tasks refused")
	if strings.Contains(r.stderr, "tasks done") {
		t.Errorf("progress told for a file of one batch:\n%s", r.stderr)
	}

	page := s.okJSON(t, "tasks", "list")
	items := page["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("tasks stored = %v, want 2", items)
	}
	if newest := items[0].(map[string]any); newest["targetUrl"] != "http://h/8" || newest["nextAttemptAt"] != float64(later) {
		t.Errorf("the task of line 8 = %v, want due at its notBefore %d", newest, later)
	}

	// With --json, a line of JSON per task line, in order.
	r = s.run(t, strings.Join(lines, "\n"), nil, "tasks", "submit", "--file", "-", "--json")
	if r.code != cli.ExitError {
		t.Errorf("--json: exit %d, want %d", r.code, cli.ExitError)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var lr struct {
			Line   int
			Status int
			Task   *struct{ TaskID string }
			Error  *struct{ Code, Field string }
		}
		if err := json.Unmarshal([]byte(l), &lr); err != nil {
			t.Fatalf("--json printed %q: %v", l, err)
		}
		s := fmt.Sprintf("%d:%d", lr.Line, lr.Status)
		if lr.Error != nil {
			s += ":" + lr.Error.Code + ":" + lr.Error.Field
		}
		got = append(got, s)
	}
	want := []string{"1:200", "3:400:invalid_request:targetUrl", "4:0:invalid_request:", "5:200", "6:0:invalid_request:",
		"7:409:conflict:idempotencyKey", "8:201", "9:400:unknown_policy:policyId"}
	if !slices.Equal(got, want) {
		t.Errorf("--json lines = %v\nwant %v", got, want)
	}
	wantContains(t, "--json stderr", r.stderr, "1 created, 2 repeated, 5 refused")
}

// A file of several batches is sent in batches of 1,000, with progress on
// stderr.
func TestSubmitFileBatches(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p")
	var in strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&in, `{"targetUrl":"http://h/%d","policyId":"p","idempotencyKey":"k%d"}`+"\n", i, i)
	}
	r := s.run(t, in.String(), nil, "tasks", "submit", "--file", "-")
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "stdout", r.stdout, "2500 created, 0 repeated, 0 refused")
	wantContains(t, "stderr", r.stderr, "1000 tasks done (to line 1000)", "2000 tasks done (to line 2000)")
	if n, err := taskCount(s.store); err != nil || n != 2500 {
		t.Errorf("%d tasks stored (%v), want 2500", n, err)
	}
	// Again: every task is a repeat.
	r = s.run(t, in.String(), nil, "tasks", "submit", "--file", "-")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "0 created, 2500 repeated, 0 refused") {
		t.Errorf("resubmitting: exit %d, stdout %s", r.code, r.stdout)
	}
}

// A request refused whole stops the run and says which lines were sent.
func TestSubmitFileRefusedWhole(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := s.run(t, `{"targetUrl":"http://h/","policyId":"p"}`+"\n", map[string]string{"RETRYD_TOKEN": "wrong-token-0123456789"},
		"tasks", "submit", "--file", "-")
	if r.code != cli.ExitError {
		t.Errorf("exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "stderr", r.stderr, "lines 1 to 1", "401", "nothing after line 1 was sent")

	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		err         string
	}{
		{"no task", "\n\n", []string{"--file", "-"}, cli.ExitError, "no task"},
		{"no such file", "", []string{"--file", filepath.Join(t.TempDir(), "none.jsonl")}, cli.ExitError, "none.jsonl"},
		{"--file with --policy", "", []string{"--file", "-", "--policy", "p"}, cli.ExitUsage, "drop --policy"},
		{"--file with --not-before", "", []string{"--file", "-", "--not-before", "1h"}, cli.ExitUsage, "drop --not-before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.run(t, tc.stdin, nil, append([]string{"tasks", "submit"}, tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			wantContains(t, "stderr", r.stderr, tc.err)
		})
	}
}

func TestSubmitNotBefore(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p")
	submit := func(t *testing.T, notBefore string) map[string]any {
		t.Helper()
		return s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://h/", "--not-before", notBefore)
	}
	at := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	if got := submit(t, at.Format(time.RFC3339)); got["nextAttemptAt"] != float64(at.UnixMilli()) {
		t.Errorf("RFC 3339: nextAttemptAt = %v, want %d", got["nextAttemptAt"], at.UnixMilli())
	}
	// A fraction of a millisecond rounds up: never early.
	if got := submit(t, at.Add(100*time.Microsecond).Format(time.RFC3339Nano)); got["nextAttemptAt"] != float64(at.UnixMilli()+1) {
		t.Errorf("RFC 3339 with microseconds: nextAttemptAt = %v, want %d", got["nextAttemptAt"], at.UnixMilli()+1)
	}
	if got := submit(t, fmt.Sprint(at.UnixMilli()+5)); got["nextAttemptAt"] != float64(at.UnixMilli()+5) {
		t.Errorf("epoch ms: nextAttemptAt = %v, want %d", got["nextAttemptAt"], at.UnixMilli()+5)
	}
	before := time.Now().Add(time.Hour).UnixMilli()
	got := submit(t, "1h")
	if next := int64(got["nextAttemptAt"].(float64)); next < before || next > time.Now().Add(time.Hour).UnixMilli()+1 {
		t.Errorf("1h: nextAttemptAt = %d, want an hour after the call", next)
	}
	out := s.ok(t, "tasks", "submit", "--policy", "p", "--target", "http://h/", "--not-before", at.Format(time.RFC3339))
	wantContains(t, "table", out, "Next attempt:", at.Local().Format("2006-01-02 15:04:05"))

	for _, bad := range []string{"tomorrow", "-5m", "2030-01-02"} {
		r := s.run(t, "", nil, "tasks", "submit", "--policy", "p", "--target", "http://h/", "--not-before", bad)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--not-before") {
			t.Errorf("--not-before %s: exit %d, stderr %s; want a usage error", bad, r.code, r.stderr)
		}
	}
	r := s.run(t, "", nil, "tasks", "submit", "--policy", "p", "--target", "http://h/", "--not-before", "87600h0m1s")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "notBefore") {
		t.Errorf("--not-before past ten years: exit %d, stderr %s; want the service's refusal", r.code, r.stderr)
	}
}

func taskCount(st store.Store) (int64, error) {
	counts, err := st.TaskCounts(context.Background())
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, err
}

// A large body goes to the blob store, and tasks get says so; a body by
// reference is submitted with --body-ref, within the tenant's allow-list.
func TestBodiesByReference(t *testing.T) {
	t.Parallel()
	s := setupWith(t, true)
	s.ok(t, "policies", "put", "p")

	big := filepath.Join(t.TempDir(), "big.ndjson")
	if err := os.WriteFile(big, bytes.Repeat([]byte(`{"event":"order.created","id":42}`+"\n"), 10000), 0o600); err != nil {
		t.Fatal(err)
	}
	task := s.okJSON(t, "tasks", "submit", "--policy", "p", "--target", "http://h/in", "--body-file", big)
	ref, _ := task["bodyRef"].(string)
	if !strings.HasPrefix(ref, "blob:sha256:") || task["bodySize"] != 340000.0 || task["body"] != nil {
		t.Fatalf("submitted: bodyRef %v bodySize %v body present %t", task["bodyRef"], task["bodySize"], task["body"] != nil)
	}
	out := s.ok(t, "tasks", "get", task["taskId"].(string))
	wantContains(t, "tasks get", out, "Body:", "340000 bytes, by reference: "+ref)

	out = s.ok(t, "tasks", "submit", "--policy", "p", "--target", "http://h/in", "--body-ref", "s3://payloads/acme/2025/07/order-42.json")
	wantContains(t, "submit --body-ref", out, "Body:", "by reference: s3://payloads/acme/2025/07/order-42.json")
	if strings.Contains(out, "bytes") {
		t.Errorf("a caller's bodyRef shows a size:\n%s", out)
	}

	r := s.run(t, "", nil, "tasks", "submit", "--policy", "p", "--target", "http://h/in", "--body-ref", "s3://payloads/globex/x.json")
	if r.code != cli.ExitError {
		t.Fatalf("a bodyRef outside the allow-list: exit %d", r.code)
	}
	wantContains(t, "stderr", r.stderr, "400", "bodyRef", "s3://payloads/acme/")
}
