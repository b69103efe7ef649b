package run_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

const (
	tokenA       = "token-of-tenant-a-0123456789"
	tokenB       = "token-of-tenant-b-0123456789"
	metricsToken = "prometheus-scrapes-0123456789"
)

// syncBuffer is a log sink a test reads while retryd writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// served is a retryd run by a test: its API's base URL and its JSON log.
type served struct {
	url string
	log *syncBuffer
}

// writeFile writes content to a new file in t's temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serve runs retryd with args (and a store and listen address of its own)
// until the test ends.
func serve(t *testing.T, args ...string) *served {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0", "--store", filepath.Join(t.TempDir(), "r.db")}, args...)
	c, err := run.ParseConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- run.Serve(ctx, c, slog.New(slog.NewJSONHandler(logs, nil)), ready) }()
	select {
	case a := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
		return &served{url: "http://" + a.String(), log: logs}
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	return nil
}

// metricsURL is where s says it serves /metrics.
func (s *served) metricsURL(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(s.log.String(), "\n") {
		var l struct {
			Msg string
			URL string `json:"metrics_url"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "retryd listening" && l.URL != "" {
			return l.URL
		}
	}
	t.Fatalf("no metrics_url logged:\n%s", s.log.String())
	return ""
}

// do sends method url with token (none when empty) and body, and returns
// the status, Content-Type and body of the answer.
func do(t *testing.T, method, url, token string, body any) (int, string, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// wantUnauthorized checks an answer is the API's JSON 401.
func wantUnauthorized(t *testing.T, what string, status int, ctype, body string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if status != http.StatusUnauthorized || ctype != "application/json" || json.Unmarshal([]byte(body), &e) != nil ||
		e.Error.Code != "unauthorized" || e.Error.Message == "" {
		t.Errorf("%s: %d %q %.300q; want a JSON 401 unauthorized", what, status, ctype, body)
	}
	if strings.Contains(body, "retry_") {
		t.Errorf("%s: the answer shows metrics", what)
	}
}

func tenantsFile(t *testing.T) string {
	return writeFile(t, "tokens", tokenA+" tenant-a\n"+tokenB+" tenant-b\n")
}

// TestMetricsClosedWithoutTheirCredential: with a tokens file and no
// credential of the metrics' own, /metrics answers everyone 401 JSON —
// tenants too, whose tokens would show every tenant's policies — while
// the probes stay open.
func TestMetricsClosedWithoutTheirCredential(t *testing.T) {
	t.Parallel()
	s := serve(t, "--tokens-file", tenantsFile(t))
	status, ctype, body := do(t, "GET", s.url+"/metrics", "", nil)
	wantUnauthorized(t, "GET /metrics without a token", status, ctype, body)
	if !strings.Contains(body, "--metrics-token-file") {
		t.Errorf("the 401 does not say what is missing: %.300q", body)
	}
	status, ctype, body = do(t, "GET", s.url+"/metrics", tokenA, nil)
	wantUnauthorized(t, "GET /metrics with a tenant's token", status, ctype, body)
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, _, body := do(t, "GET", s.url+p, "", nil); status != 200 {
			t.Errorf("GET %s = %d %s, want 200", p, status, body)
		}
	}
	if !strings.Contains(s.log.String(), "/metrics answers 401 to every request") {
		t.Errorf("no warning at startup:\n%s", s.log.String())
	}
}

// TestMetricsNeedTheirToken: with --metrics-token-file, /metrics answers
// its token only — not a tenant's, nor none — and counts two tenants'
// policies of one ID apart.
func TestMetricsNeedTheirToken(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	s := serve(t, "--tokens-file", tenantsFile(t), "--allow-target", "127.0.0.1/32",
		"--metrics-token-file", writeFile(t, "metrics-tokens", "# Prometheus\n"+metricsToken+"\n"))

	for _, token := range []string{"", tokenA, tokenB, metricsToken + "x"} {
		status, ctype, body := do(t, "GET", s.url+"/metrics", token, nil)
		wantUnauthorized(t, "GET /metrics with token "+token, status, ctype, body)
	}
	// The metrics token is no tenant's: the API refuses it.
	if status, _, body := do(t, "GET", s.url+"/retry-policies", metricsToken, nil); status != http.StatusUnauthorized {
		t.Errorf("the metrics token used the API: %d %s", status, body)
	}

	// Two tenants, one policy ID each, one task each.
	policy := map[string]any{"policyId": "orders", "backoff": "FIXED", "initialDelayMs": 10, "jitterType": "NONE", "maxAttempts": 2}
	for _, token := range []string{tokenA, tokenB} {
		if status, _, body := do(t, "POST", s.url+"/retry-policies", token, policy); status != http.StatusCreated {
			t.Fatalf("POST /retry-policies = %d %s", status, body)
		}
		task := map[string]any{"targetUrl": target.URL + "/hook", "method": "POST", "body": "{}", "policyId": "orders"}
		if status, _, body := do(t, "POST", s.url+"/retry-tasks", token, task); status != http.StatusCreated {
			t.Fatalf("POST /retry-tasks = %d %s", status, body)
		}
	}
	want := []string{
		`retry_attempts_total{outcome="succeeded",policy="orders",tenant="tenant-a"} 1` + "\n",
		`retry_attempts_total{outcome="succeeded",policy="orders",tenant="tenant-b"} 1` + "\n",
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, ctype, body := do(t, "GET", s.url+"/metrics", metricsToken, nil)
		if status != 200 || !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(body, "retry_tasks{") {
			t.Fatalf("GET /metrics with the metrics token = %d %q %.200s", status, ctype, body)
		}
		if strings.Contains(body, want[0]) && strings.Contains(body, want[1]) {
			if n := strings.Count(body, "\nretry_attempts_total{"); n != 2 {
				t.Errorf("%d retry_attempts_total series, want 2:\n%s", n, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetricsListen: --metrics-listen serves /metrics (and the probes) on a
// listener of its own, open unless --metrics-token-file is given, and
// /metrics leaves the API's listener.
func TestMetricsListen(t *testing.T) {
	t.Parallel()
	t.Run("open", func(t *testing.T) {
		t.Parallel()
		s := serve(t, "--tokens-file", tenantsFile(t), "--metrics-listen", "127.0.0.1:0")
		murl := s.metricsURL(t)
		if strings.HasPrefix(murl, s.url+"/") {
			t.Fatalf("metrics on the API's listener: %s", murl)
		}
		if status, _, body := do(t, "GET", murl, "", nil); status != 200 || !strings.Contains(body, "retry_tasks{") {
			t.Errorf("GET %s = %d %.200s, want the metrics", murl, status, body)
		}
		base := strings.TrimSuffix(murl, "/metrics")
		if status, _, _ := do(t, "GET", base+"/readyz", "", nil); status != 200 {
			t.Errorf("GET /readyz on the metrics listener = %d", status)
		}
		if status, ctype, body := do(t, "GET", base+"/retry-policies", tokenA, nil); status != 404 || ctype != "application/json" {
			t.Errorf("the API on the metrics listener: %d %q %s, want a JSON 404", status, ctype, body)
		}
		for _, token := range []string{"", tokenA} {
			if status, _, body := do(t, "GET", s.url+"/metrics", token, nil); status == 200 || strings.Contains(body, "retry_") {
				t.Errorf("GET /metrics on the API's listener with %q = %d %.200s", token, status, body)
			}
		}
	})
	t.Run("with a token, authentication off", func(t *testing.T) {
		t.Parallel()
		s := serve(t, "--metrics-listen", "127.0.0.1:0", "--metrics-token-file", writeFile(t, "m", metricsToken+"\n"))
		murl := s.metricsURL(t)
		status, ctype, body := do(t, "GET", murl, "", nil)
		wantUnauthorized(t, "GET /metrics without a token", status, ctype, body)
		if status, _, body := do(t, "GET", murl, metricsToken, nil); status != 200 || !strings.Contains(body, "retry_tasks{") {
			t.Errorf("GET %s with the token = %d %.200s", murl, status, body)
		}
	})
}

// TestMetricsOpenWithoutAuthentication: without a tokens file, /metrics
// stays open on the API's listener, as it always was.
func TestMetricsOpenWithoutAuthentication(t *testing.T) {
	t.Parallel()
	s := serve(t)
	if status, _, body := do(t, "GET", s.url+"/metrics", "", nil); status != 200 || !strings.Contains(body, "retry_tasks{") {
		t.Errorf("GET /metrics = %d %.200s", status, body)
	}
}

// TestMetricsFlagsRefused: a metrics token that is also a tenant's, and
// limits below 1, stop retryd at startup.
func TestMetricsFlagsRefused(t *testing.T) {
	t.Parallel()
	tenants := tenantsFile(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tenant's token", []string{"--tokens-file", tenants, "--metrics-token-file", writeFile(t, "m", tokenB+"\n")}, "tenant-b"},
		{"short token", []string{"--metrics-token-file", writeFile(t, "m", "short\n")}, "shorter"},
		{"no policies", []string{"--metrics-max-policies", "0"}, "--metrics-max-policies"},
		{"no policies per tenant", []string{"--metrics-max-policies-per-tenant", "-1"}, "--metrics-max-policies"},
	} {
		args := append([]string{"--listen", "127.0.0.1:0", "--store", filepath.Join(t.TempDir(), "r.db")}, tc.args...)
		c, err := run.ParseConfig(args, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = run.Serve(ctx, c, slog.New(slog.DiscardHandler), nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Serve = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
