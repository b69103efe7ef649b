package metrics_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/metrics"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	const good, rotated = "metrics-token-0123456789", "metrics-token-rotated-0123"
	tokens, err := metrics.NewTokens([]string{good, rotated})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics\n") })
	guarded := httptest.NewServer(metrics.Guard(ok, tokens, "closed"))
	defer guarded.Close()
	closed := httptest.NewServer(metrics.Guard(ok, nil, "no metrics credential is configured"))
	defer closed.Close()

	for _, tc := range []struct {
		name, url, auth string
		status          int
		message         string
	}{
		{"no header", guarded.URL, "", 401, "want an Authorization: Bearer token"},
		{"basic", guarded.URL, "Basic " + good, 401, "want an Authorization: Bearer token"},
		{"wrong token", guarded.URL, "Bearer tenant-token-0123456789", 401, "not a metrics token"},
		{"a prefix of the token", guarded.URL, "Bearer " + good[:len(good)-1], 401, "not a metrics token"},
		{"good", guarded.URL, "Bearer " + good, 200, ""},
		{"rotated, lower-case scheme", guarded.URL, "bearer " + rotated, 200, ""},
		{"closed, no header", closed.URL, "", 401, "no metrics credential is configured"},
		{"closed, any token", closed.URL, "Bearer " + good, 401, "no metrics credential is configured"},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
			continue
		}
		if tc.status == 200 {
			if string(body) != "metrics\n" {
				t.Errorf("%s: body %q", tc.name, body)
			}
			continue
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil ||
			e.Error.Code != "unauthorized" || !strings.Contains(e.Error.Message, tc.message) ||
			!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: %q %q %s; want a JSON unauthorized error saying %q", tc.name,
				resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"), body, tc.message)
		}
	}
}

func TestTokensFile(t *testing.T) {
	t.Parallel()
	got, err := metrics.ReadTokens(strings.NewReader("# prometheus\n\n  metrics-token-0123456789  \nsecond-token-0123456789\n"))
	if err != nil || len(got) != 2 || got[0] != "metrics-token-0123456789" || got[1] != "second-token-0123456789" {
		t.Fatalf("ReadTokens = %q, %v", got, err)
	}
	if _, err := metrics.ReadTokens(strings.NewReader("metrics-token-0123456789 tenant\n")); err == nil {
		t.Error("a line of two fields (a tenants file?) read as a token")
	}
	for _, bad := range [][]string{nil, {"short"}, {"metrics-token-0123456789\x01"}} {
		if _, err := metrics.NewTokens(bad); err == nil {
			t.Errorf("NewTokens(%q) = nil error", bad)
		}
	}
}
