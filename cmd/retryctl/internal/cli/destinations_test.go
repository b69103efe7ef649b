package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
)

// whsec matches a signing secret as retryd makes them.
var whsec = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{20,}`)

func TestDestinations(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const token, header = "bearer-in-the-clear", "header-in-the-clear"
	spec := `{"url":"https://api.example.com/hooks","auth":{"type":"bearer","token":"` + token + `"},
		"headers":{"X-Tenant":"` + header + `"},"signing":{"scheme":"standard-webhooks"},
		"rateLimit":{"perSecond":50,"burst":5},"maxInFlight":10,"timeoutMs":5000}`
	file := filepath.Join(t.TempDir(), "orders.json")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	out := s.ok(t, "destinations", "put", "orders", "--file", file)
	wantContains(t, "put output", out, "created destination orders", "https://api.example.com/hooks", "ACTIVE",
		"bearer, token set", "X-Tenant: ••••", "standard-webhooks, secret set", "50/s, burst 5", "Max in flight:", "10", "5s",
		"New signing secret, shown this once")
	if secrets := whsec.FindAllString(out, -1); len(secrets) != 1 {
		t.Errorf("put printed %d signing secrets, want 1:\n%s", len(secrets), out)
	}

	// The same settings from stdin: nothing new, no secret.
	r := s.run(t, spec, nil, "destinations", "put", "orders", "--file", "-")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "already exists with these settings") || whsec.MatchString(r.stdout) {
		t.Errorf("repeated put: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = s.run(t, "", nil, "destinations", "put", "orders", "--spec", `{"url":"https://other.example.com/"}`)
	if r.code != cli.ExitError {
		t.Errorf("conflicting put: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "conflict stderr", r.stderr, "409", "conflict", "PATCH")

	got := s.okJSON(t, "destinations", "get", "orders")
	if got["destinationId"] != "orders" || got["status"] != "ACTIVE" || got["version"] == nil {
		t.Errorf("get --json = %v", got)
	}
	b, _ := json.Marshal(got)
	wantContains(t, "get --json", string(b), `"token":{"set":true}`, `"X-Tenant":{"set":true}`, `"secret":{"set":true}`)
	out = s.ok(t, "destinations", "list")
	wantContains(t, "list", out, "DESTINATION", "STATUS", "orders", "ACTIVE", "bearer", "standard-webhooks", "50/s")
	for _, args := range [][]string{{"destinations", "get", "orders"}, {"destinations", "list", "--json"}} {
		if out := s.ok(t, args...); strings.Contains(out, token) || strings.Contains(out, header) || whsec.MatchString(out) {
			t.Errorf("%v shows a secret:\n%s", args, out)
		}
	}

	// A patch; then get's JSON, edited and sent back at its version, which
	// keeps the secrets it shows as set.
	out = s.ok(t, "destinations", "patch", "orders", "--spec", `{"rateLimit":{"perSecond":5},"maxInFlight":null}`)
	wantContains(t, "patch output", out, "updated destination orders, now at version", "5/s", "no cap")
	got = s.okJSON(t, "destinations", "get", "orders")
	version := strconv.FormatFloat(got["version"].(float64), 'f', -1, 64)
	got["timeoutMs"] = 2500
	b, _ = json.Marshal(got)
	r = s.run(t, string(b), nil, "destinations", "patch", "orders", "--file", "-", "--version", version)
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "2.5s") || !strings.Contains(r.stdout, "bearer, token set") {
		t.Errorf("patch of get's JSON at version %s: exit %d\n%s%s", version, r.code, r.stdout, r.stderr)
	}
	r = s.run(t, "", nil, "destinations", "patch", "orders", "--spec", `{"timeoutMs":1000}`, "--version", version)
	if r.code != cli.ExitError {
		t.Errorf("patch at a stale version: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "stale patch stderr", r.stderr, "409", "version")

	out = s.ok(t, "destinations", "pause", "orders", "--reason", "their maintenance window")
	wantContains(t, "pause output", out, "paused destination orders", "PAUSED since", "their maintenance window")
	out = s.ok(t, "destinations", "resume", "orders")
	wantContains(t, "resume output", out, "resumed destination orders", "ACTIVE since")
	if strings.Contains(out, "maintenance") {
		t.Errorf("the pause's reason outlives the resume:\n%s", out)
	}

	out = s.ok(t, "destinations", "rotate-secret", "orders")
	wantContains(t, "rotate output", out, "rotated the signing secret of destination orders",
		"New signing secret, shown this once", "A previous secret signs beside it until")
	first := whsec.FindString(out)
	rotated := s.okJSON(t, "destinations", "rotate-secret", "orders", "--overlap", "90m")
	second, _ := rotated["signing"].(map[string]any)["secret"].(string)
	if first == "" || !whsec.MatchString(second) || second == first {
		t.Errorf("rotations made %q, then %q; want two new secrets", first, second)
	}
	if prev := rotated["signing"].(map[string]any)["previous"].([]any); len(prev) != 2 {
		t.Errorf("after two rotations with overlap, previous = %v, want 2", prev)
	}
	if out := s.ok(t, "destinations", "get", "orders"); strings.Count(out, "Previous secret:") != 2 || whsec.MatchString(out) {
		t.Errorf("get after rotations:\n%s", out)
	}

	s.ok(t, "destinations", "put", "fresh", "--spec", `{"url":"https://fresh.example.com/","signing":{"scheme":"standard-webhooks"}}`)
	out = s.ok(t, "destinations", "rotate-secret", "fresh", "--overlap", "0")
	wantContains(t, "rotation without overlap", out, "No previous secret signs beside it")
	s.ok(t, "destinations", "put", "plain", "--spec", `{"url":"https://plain.example.com/"}`)
	r = s.run(t, "", nil, "destinations", "rotate-secret", "plain")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "signing") {
		t.Errorf("rotating a destination that does not sign: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestDestinationTasks(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "destinations", "put", "orders", "--spec", `{"url":"https://api.example.com/hooks"}`)

	out := s.ok(t, "tasks", "submit", "--destination", "orders", "--path", "/paid?id=7", "-H", "Authorization: Bearer x")
	wantContains(t, "submit output", out, "Request:", "POST [orders]/paid?id=7", "Destination:", "orders", "Path:", "/paid?id=7",
		"Authorization: ••••")
	task := s.okJSON(t, "tasks", "submit", "--destination", "orders", "--target", "https://api.example.com/hooks/refunded")
	if task["destinationId"] != "orders" || task["path"] != "/refunded" || task["targetUrl"] != nil {
		t.Errorf("a task by a URL under the destination = %v", task)
	}
	s.ok(t, "tasks", "submit", "--target", "https://api.example.com/hooks/plain")
	r := s.run(t, `{"destinationId":"orders","path":"/from-file"}`+"\n", nil, "tasks", "submit", "--file", "-")
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "1 created") {
		t.Errorf("a file task of the destination: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	out = s.ok(t, "tasks", "list", "--destination", "orders")
	wantContains(t, "list --destination", out, "[orders]/paid?id=7", "[orders]/refunded", "[orders]/from-file")
	if strings.Contains(out, "plain") {
		t.Errorf("list --destination lists another task:\n%s", out)
	}

	r = s.run(t, "", nil, "destinations", "delete", "orders")
	if r.code != cli.ExitError {
		t.Errorf("delete with live tasks: exit %d, want %d", r.code, cli.ExitError)
	}
	wantContains(t, "delete stderr", r.stderr, "409", "live tasks")
	page := s.okJSON(t, "tasks", "list", "--destination", "orders")
	for _, it := range page["items"].([]any) {
		s.ok(t, "tasks", "cancel", it.(map[string]any)["taskId"].(string))
	}
	out = s.ok(t, "destinations", "delete", "orders")
	wantContains(t, "delete output", out, "deleted destination orders")
	r = s.run(t, "", nil, "destinations", "get", "orders")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "404") {
		t.Errorf("get after delete: exit %d, stderr %s", r.code, r.stderr)
	}
	r = s.run(t, "", nil, "tasks", "submit", "--destination", "orders", "--path", "/x")
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "destinationId") {
		t.Errorf("submit to a deleted destination: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestDestinationCommandLines(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.ok(t, "destinations", "put", "orders", "--spec", `{"url":"https://api.example.com/"}`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"put without JSON", []string{"destinations", "put", "x"}, cli.ExitUsage, "--spec or --file"},
		{"put with both", []string{"destinations", "put", "x", "--spec", "{}", "--file", "-"}, cli.ExitUsage, "not both"},
		{"put naming another", []string{"destinations", "put", "x", "--spec", `{"destinationId":"y","url":"https://h/"}`}, cli.ExitUsage, `"y"`},
		{"put with a misspelt field", []string{"destinations", "put", "x", "--spec", `{"url":"https://h/","rateLimt":{}}`}, cli.ExitError, "rateLimt"},
		{"put refused", []string{"destinations", "put", "x", "--spec", `{"url":"ftp://h/"}`}, cli.ExitError, "url"},
		{"patch without JSON", []string{"destinations", "patch", "orders"}, cli.ExitUsage, "--spec or --file"},
		{"patch not JSON", []string{"destinations", "patch", "orders", "--spec", "{"}, cli.ExitError, "not JSON"},
		{"patch of none", []string{"destinations", "patch", "nope", "--spec", "{}"}, cli.ExitError, "404"},
		{"negative overlap", []string{"destinations", "rotate-secret", "orders", "--overlap", "-1s"}, cli.ExitUsage, "--overlap"},
		{"no id", []string{"destinations", "pause"}, cli.ExitUsage, "DESTINATION_ID"},
		{"submit without target or destination", []string{"tasks", "submit"}, cli.ExitUsage, "--target is required"},
		{"path without destination", []string{"tasks", "submit", "--target", "https://h/", "--path", "/x"}, cli.ExitUsage, "--path needs --destination"},
		{"path and target", []string{"tasks", "submit", "--destination", "orders", "--path", "/x", "--target", "https://api.example.com/x"}, cli.ExitUsage, "not both"},
		{"destination and target host", []string{"tasks", "list", "--destination", "orders", "--target-host", "h"}, cli.ExitError, "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.run(t, "", nil, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			wantContains(t, "stderr", r.stderr, tc.err)
		})
	}
}
