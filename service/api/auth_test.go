package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/api"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	tests := []struct {
		name, auth string
	}{
		{"no header", ""},
		{"not bearer", "Basic " + tokenA},
		{"empty token", "Bearer "},
		{"unknown token", "Bearer token-of-nobody-0123456789"},
		{"a prefix of a token", "Bearer " + tokenA[:len(tokenA)-1]},
		{"a token and more", "Bearer " + tokenA + "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hdr := map[string]string{}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			for _, rt := range api.Routes() {
				path := strings.NewReplacer("{policyId}", "p", "{taskId}", "00000000-0000-4000-8000-000000000000").Replace(rt.Path)
				r := e.doWith(t, rt.Method, path, "", hdr)
				r.wantError(t, http.StatusUnauthorized, "unauthorized", "")
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("%s %s: WWW-Authenticate = %q", rt.Method, path, got)
				}
			}
		})
	}
	// The scheme is case-insensitive.
	e.doWith(t, "GET", "/retry-tasks", "", map[string]string{"Authorization": "bearer " + tokenA}).wantStatus(t, http.StatusOK)
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	a := &env{srv: e.srv, store: e.store, token: tokenA}
	b := &env{srv: e.srv, store: e.store, token: tokenB}

	a.putPolicy(t, `{"policyId":"p","maxAttempts":2}`)
	// b may register the same policyId with other settings: it is its own.
	b.putPolicy(t, `{"policyId":"p","maxAttempts":9}`)
	if got := b.do(t, "GET", "/retry-policies/p", "").wantStatus(t, http.StatusOK)["maxAttempts"]; got != 9.0 {
		t.Errorf("b's policy p has maxAttempts %v, want its own 9", got)
	}
	a.putPolicy(t, `{"policyId":"only-a"}`)
	b.do(t, "GET", "/retry-policies/only-a", "").wantError(t, http.StatusNotFound, "not_found", "")
	b.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"only-a"}`).
		wantError(t, http.StatusBadRequest, "unknown_policy", "policyId")

	task := a.createTask(t, `{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"shared-key"}`)
	id := task["taskId"].(string)
	for _, req := range []struct{ method, path string }{
		{"GET", "/retry-tasks/" + id},
		{"DELETE", "/retry-tasks/" + id},
		{"GET", "/retry-tasks/" + id + "/attempts"},
		{"POST", "/retry-tasks/" + id + "/redrive"},
	} {
		b.do(t, req.method, req.path, "").wantError(t, http.StatusNotFound, "not_found", "")
	}
	for _, path := range []string{"/retry-tasks", "/dead-letters", "/retry-policies"} {
		page := b.do(t, "GET", path, "").wantStatus(t, http.StatusOK)
		for _, it := range page["items"].([]any) {
			if m := it.(map[string]any); m["taskId"] == id || m["policyId"] == "only-a" {
				t.Errorf("b lists a's %v", m)
			}
		}
	}
	// An idempotency key is per tenant: b's same key is b's own new task.
	other := b.createTask(t, `{"targetUrl":"http://h/other","policyId":"p","idempotencyKey":"shared-key"}`)
	if other["taskId"] == id {
		t.Error("b's task with a's idempotency key is a's task")
	}
	// a's task is untouched by b's attempts.
	if got := a.do(t, "GET", "/retry-tasks/"+id, "").wantStatus(t, http.StatusOK)["status"]; got != "PENDING" {
		t.Errorf("a's task status = %v, want PENDING", got)
	}
}

func TestAuthOffIsDefaultTenant(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	// Without tokens any Authorization header is ignored.
	e.doWith(t, "GET", "/retry-policies/p", "", map[string]string{"Authorization": "Bearer whatever"}).wantStatus(t, http.StatusOK)
	if _, err := e.store.PolicyGet(t.Context(), api.DefaultTenant, "p"); err != nil {
		t.Errorf("policy is not the default tenant's: %v", err)
	}
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		wantErr    bool
		lookups    map[string]string // token → tenant; "" means unknown
	}{
		{"pairs and comments", "# tokens\n\nalpha-token-0123456789 acme\n\tbeta-token-01234567890\tacme  \n gamma-token-0123456789 globex\n", false,
			map[string]string{"alpha-token-0123456789": "acme", "beta-token-01234567890": "acme", "gamma-token-0123456789": "globex", "alpha-token-012345678": "", "": ""}},
		{"empty", "# nothing\n", true, nil},
		{"one field", "alpha-token-0123456789\n", true, nil},
		{"three fields", "alpha-token-0123456789 acme extra\n", true, nil},
		{"short token", "short acme\n", true, nil},
		{"repeated token", "alpha-token-0123456789 acme\nalpha-token-0123456789 globex\n", true, nil},
		{"bad tenant", "alpha-token-0123456789 acme/evil\n", true, nil},
		{"control byte", "alpha-token-0123456789\x01 acme\n", true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokens, err := api.ParseTokens(strings.NewReader(tc.file))
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseTokens error = %v, want error %v", err, tc.wantErr)
			}
			for token, want := range tc.lookups {
				got, ok := tokens.Tenant(token)
				if got != want || ok != (want != "") {
					t.Errorf("Tenant(%q) = %q, %v; want %q", token, got, ok, want)
				}
			}
		})
	}
}

func TestLoadTokens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("alpha-token-0123456789 acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := api.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tokens.Len(), 1; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	if _, err := api.LoadTokens(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("LoadTokens of a missing file succeeded")
	}
}
