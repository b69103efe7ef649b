package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/console"
	"github.com/retrykit/retry/service/store/sqlite"
)

const token = "console-unit-token-0123456789"

// server is retryd's API and console behind Protect, as retryd mounts them.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := serverWith(t, nil)
	return srv
}

// serverWith is server with the API's Config changed by with (when not
// nil), also returning the store, through which tests put tasks in the
// states only a scheduler would.
func serverWith(t *testing.T, with func(*api.Config)) (*httptest.Server, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := api.ParseTokens(strings.NewReader(token + " tenant-a\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{Store: st, Tokens: tokens}
	if with != nil {
		with(&cfg)
	}
	h, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("/ui/", console.Handler(tokens))
	srv := httptest.NewServer(console.Protect(mux))
	t.Cleanup(srv.Close)
	return srv, st
}

func send(t *testing.T, method, url, body string, hdr map[string]string, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestPagesCarryAStrictPolicy(t *testing.T) {
	srv := server(t)
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		resp := send(t, "GET", srv.URL+path, "", nil)
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != http.StatusOK || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, CSP %q", path, resp.StatusCode, csp)
		}
	}
}

func TestSessionCookie(t *testing.T) {
	srv := server(t)
	json := map[string]string{"Content-Type": "application/json"}
	if resp := send(t, "POST", srv.URL+"/ui/session", `{"token":"wrong"}`, json); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("a wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp := send(t, "POST", srv.URL+"/ui/session", `{"token":"`+token+`"}`, json)
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("sign in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	c := resp.Cookies()[0]
	if c.Name != api.SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/", c)
	}
	// The cookie signs the API in, for the same origin…
	if resp := send(t, "GET", srv.URL+"/retry-tasks", "", nil, c); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /retry-tasks with the cookie: %d", resp.StatusCode)
	}
	if resp := send(t, "GET", srv.URL+"/retry-tasks", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /retry-tasks without it: %d", resp.StatusCode)
	}
	same := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}
	if resp := send(t, "POST", srv.URL+"/retry-policies", `{"policyId":"p"}`, same, c); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a same-origin POST with the cookie: %d", resp.StatusCode)
	}
	// …but a page of another origin (another port of the same host is
	// the same site, so SameSite alone would let it through) changes nothing.
	for _, hdr := range []map[string]string{
		{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
		{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"},
	} {
		if resp := send(t, "POST", srv.URL+"/retry-policies", `{"policyId":"q"}`, hdr, c); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a cross-origin POST (%v): %d, want 403", hdr, resp.StatusCode)
		}
		if resp := send(t, "POST", srv.URL+"/ui/session", `{"token":"`+token+`"}`, hdr); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a cross-origin sign-in (%v): %d, want 403", hdr, resp.StatusCode)
		}
	}
	if resp := send(t, "DELETE", srv.URL+"/ui/session", "", nil, c); resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("sign out: %d %v", resp.StatusCode, resp.Cookies())
	}
}
