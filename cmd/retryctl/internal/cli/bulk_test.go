package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
	"github.com/retrykit/retry/service/store"
)

// deadLetter makes every due task of st a dead letter with the last status
// (an answer) or, when status is 0, the last error, as the scheduler
// would after their last attempt; n is how many there should be.
func deadLetter(t *testing.T, st store.Store, n, status int, lastError string) {
	t.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		now := time.Now()
		ts, err := st.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: store.MaxClaimLimit})
		if err != nil || len(ts) == 0 {
			t.Fatalf("TaskClaim after %d of %d: %d tasks, %v", done, n, len(ts), err)
		}
		fs := make([]store.Finish, len(ts))
		for i, task := range ts {
			fs[i] = store.Finish{
				TaskID: task.ID, Version: task.Version,
				Attempt: store.Attempt{AttemptNumber: task.AttemptNumber, StartedAt: now, Duration: time.Millisecond, ResponseStatus: status, ErrorMessage: lastError},
				Status:  store.Exhausted, LastError: lastError, LastStatus: status, Now: now,
			}
		}
		errs, err := st.TaskFinish(ctx, fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
		done += len(ts)
	}
}

// submitMany submits n tasks to host through "tasks submit --file".
func (s *server) submitMany(t *testing.T, n int, host string) {
	t.Helper()
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"targetUrl":"http://%s/%d","policyId":"p"}`+"\n", host, i)
	}
	if r := s.run(t, in.String(), nil, "tasks", "submit", "--file", "-"); r.code != cli.ExitOK {
		t.Fatalf("submitting %d tasks: exit %d, %s", n, r.code, r.stderr)
	}
}

func items(t *testing.T, page map[string]any) []any {
	t.Helper()
	is, ok := page["items"].([]any)
	if !ok {
		t.Fatalf("no items in %v", page)
	}
	return is
}

// Dead letters by cause, listed and redriven by filter, in bulk with
// progress; pending tasks cancelled by filter.
func TestCausesAndBulk(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "p")
	s.submitMany(t, 2100, "a.example")
	deadLetter(t, s.store, 2100, 502, "HTTP 502 Bad Gateway")
	s.submitMany(t, 3, "b.example:8080")
	deadLetter(t, s.store, 3, 0, `Post "http://b.example:8080/0": dial tcp 10.0.0.9:8080: connect: connection refused`)

	out := s.ok(t, "dead-letters", "causes")
	wantContains(t, "causes", out, "CAUSE", "COUNT", "FIRST SEEN", "LAST SEEN", "EXAMPLE",
		"2103 dead letter(s)", `dead-letters redrive --cause "HTTP 502"`)
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[1]); len(f) < 4 || f[0]+" "+f[1] != "HTTP 502" || f[2] != "2100" {
		t.Errorf("first row = %q, want HTTP 502 with 2100", lines[1])
	}
	if !strings.HasPrefix(lines[2], "connection refused") || !strings.Contains(lines[2], "  3  ") || !strings.Contains(lines[2], "dial tcp") {
		t.Errorf("second row = %q, want connection refused, 3 and the example", lines[2])
	}
	got := s.okJSON(t, "dead-letters", "causes", "--policy", "p")
	if first := items(t, got)[0].(map[string]any); first["cause"] != "HTTP 502" || first["count"] != 2100.0 || got["scanned"] != 2103.0 {
		t.Errorf("causes --json = %v", got)
	}
	if got := s.okJSON(t, "dead-letters", "causes", "--policy", "other"); len(items(t, got)) != 0 {
		t.Errorf("causes of another policy = %v, want none", got)
	}

	// Tasks by cause, target host and idempotency key.
	refused := items(t, s.okJSON(t, "tasks", "list", "--cause", "connection refused"))
	if len(refused) != 3 {
		t.Fatalf("tasks of cause connection refused: %d, want 3", len(refused))
	}
	if got := items(t, s.okJSON(t, "tasks", "list", "--target-host", "B.example:8080")); len(got) != 3 {
		t.Errorf("tasks of host b.example:8080: %d, want 3", len(got))
	}
	task := refused[1].(map[string]any)
	byKey := items(t, s.okJSON(t, "tasks", "list", "--idempotency-key", task["idempotencyKey"].(string)))
	if len(byKey) != 1 || byKey[0].(map[string]any)["taskId"] != task["taskId"] {
		t.Errorf("tasks of idempotency key %v = %v", task["idempotencyKey"], byKey)
	}
	wantContains(t, "tasks get", s.ok(t, "tasks", "get", task["taskId"].(string)), "Cause:", "connection refused")

	// A small bulk run tells no progress, only its total.
	r := s.run(t, "", nil, "dead-letters", "redrive", "--cause", "connection refused")
	if r.code != cli.ExitOK || r.stdout != "redriven 3 task(s)\n" || r.stderr != "" {
		t.Errorf("redrive by cause: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A large one tells it every 1,000 tasks.
	r = s.run(t, "", nil, "dead-letters", "redrive", "--status", "exhausted", "--target-host", "a.example", "--policy", "p")
	if r.code != cli.ExitOK || r.stdout != "redriven 2100 task(s)\n" {
		t.Errorf("bulk redrive: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantInOrder(t, r.stderr, "redriven 1000 …\n", "redriven 2000 …\n")
	if got := items(t, s.okJSON(t, "dead-letters", "list")); len(got) != 0 {
		t.Errorf("%d dead letters after the redrives, want none", len(got))
	}
	if r := s.run(t, "", nil, "dead-letters", "redrive", "--all", "--json"); r.code != cli.ExitOK || strings.TrimSpace(r.stdout) != "{\n  \"count\": 0\n}" {
		t.Errorf("redrive --all with none left: exit %d, stdout %q", r.code, r.stdout)
	}

	// The redriven tasks are pending again (no scheduler runs them here).
	r = s.run(t, "", nil, "tasks", "cancel", "--target-host", "a.example", "--json")
	var total struct{ Count int }
	if err := json.Unmarshal([]byte(r.stdout), &total); r.code != cli.ExitOK || err != nil || total.Count != 2100 {
		t.Errorf("bulk cancel --json: exit %d, stdout %q (%v), stderr %q", r.code, r.stdout, err, r.stderr)
	}
	wantContains(t, "bulk cancel's stderr", r.stderr, "cancelled 2000 …")
	out = s.ok(t, "tasks", "cancel", "--all")
	if out != "cancelled 3 task(s)\n" {
		t.Errorf("cancel --all: %q", out)
	}
	if got := items(t, s.okJSON(t, "tasks", "list", "--status", "pending")); len(got) != 0 {
		t.Errorf("%d tasks pending after cancel --all", len(got))
	}
}

// A bulk command needs a task, a filter or --all, one of them.
func TestBulkRefusals(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"tasks", "cancel"}, "--all for every task"},
		{[]string{"tasks", "cancel", "--all", "--policy", "p"}, "drop it or the filters"},
		{[]string{"tasks", "cancel", "some-id", "--target-host", "h"}, "not both"},
		{[]string{"tasks", "cancel", "a", "b"}, "got 2"},
		{[]string{"tasks", "cancel", "--cause", "timeout"}, "cause"},
		{[]string{"dead-letters", "redrive"}, "give TASK_ID, filters (--cause"},
		{[]string{"dead-letters", "redrive", "some-id", "--all"}, "not both"},
	} {
		if r := s.run(t, "", nil, tc.args...); r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, cli.ExitUsage, tc.err)
		}
	}
	if r := s.run(t, "", nil, "dead-letters", "redrive", "--cause", "HTTP 5xx"); r.code != cli.ExitError || !strings.Contains(r.stderr, "cause") {
		t.Errorf("an unknown cause: exit %d, stderr %q; want the service's refusal", r.code, r.stderr)
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "policies", "put", "fixed", "--spec", `{"backoff":"FIXED","initialDelayMs":1500,"jitterType":"NONE","maxAttempts":3}`)
	out := s.ok(t, "policies", "preview", "fixed")
	wantContains(t, "preview", out, "ATTEMPT", "DELAY p5", "p50", "p95", "CUMULATIVE p5", "REACHED",
		"budget: none; max attempts: 3; from ")
	rows := map[string][]string{}
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) == 8 {
			rows[f[0]] = f[1:]
		}
	}
	want := map[string]string{
		"2": "1.5s 1.5s 1.5s 1.5s 1.5s 1.5s 100%",
		"3": "1.5s 1.5s 1.5s 3s 3s 3s 100%",
	}
	for attempt, w := range want {
		if got := strings.Join(rows[attempt], " "); got != w {
			t.Errorf("attempt %s: %q, want %q\n%s", attempt, got, w, out)
		}
	}
	if _, ok := rows["4"]; ok {
		t.Errorf("a fourth attempt of three:\n%s", out)
	}

	// Settings not registered, with a budget that cuts the last attempts
	// short of every run.
	spec := `{"backoff":"EXPONENTIAL","initialDelayMs":1000,"multiplier":2,"jitterType":"FULL","maxAttempts":10,"totalBudgetMs":120000}`
	out = s.ok(t, "policies", "preview", "--spec", spec, "--samples", "500")
	wantContains(t, "preview --spec", out, "budget: 2m; max attempts: 10; from 500 simulated executions")
	got := s.okJSON(t, "policies", "preview", "--spec", spec)
	as := got["attempts"].([]any)
	last := as[len(as)-1].(map[string]any)
	if got["budgetMs"] != 120000.0 || got["maxAttempts"] != 10.0 || last["reached"].(float64) >= 1 {
		t.Errorf("preview --json: budgetMs %v maxAttempts %v, the last attempt reached by %v", got["budgetMs"], got["maxAttempts"], last["reached"])
	}
	if r := s.run(t, spec, nil, "policies", "preview", "--file", "-"); r.code != cli.ExitOK || !strings.Contains(r.stdout, "budget: 2m") {
		t.Errorf("preview --file -: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	// The built-in policy, which tasks naming none follow.
	s.ok(t, "policies", "preview", "default")

	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, cli.ExitUsage, "one of POLICY_ID, --spec and --file"},
		{[]string{"fixed", "--spec", "{}"}, cli.ExitUsage, "one of"},
		{[]string{"nope"}, cli.ExitError, "unknown_policy"},
		{[]string{"--spec", `{"maxAttempts":0}`}, cli.ExitError, "maxAttempts"},
		{[]string{"--spec", `{"colour":1}`}, cli.ExitError, "colour"},
	} {
		r := s.run(t, "", nil, append([]string{"policies", "preview"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) {
			t.Errorf("preview %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.err)
		}
	}
}

// A task names no policy: the built-in default.
func TestSubmitWithoutPolicy(t *testing.T) {
	t.Parallel()
	s := setup(t)
	got := s.okJSON(t, "tasks", "submit", "--target", "http://h/")
	if got["policyId"] != "default" {
		t.Errorf("policyId = %v, want default", got["policyId"])
	}
	wantContains(t, "policies get default", s.ok(t, "policies", "get", "default"), "built in")
}
