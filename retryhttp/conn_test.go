package retryhttp_test

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/retryhttp"
)

func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 16<<10)
	tests := []struct {
		name     string
		maxDrain int64
		want     int64
	}{
		{name: "drained", maxDrain: 0, want: 1},
		{name: "not drained", maxDrain: -1, want: 4},
		{name: "longer than MaxDrain", maxDrain: 1 << 10, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply{status: 503, body: body}, reply{status: 503, body: body}, reply{status: 503, body: body}, reply{status: 200, body: "ok"})
			client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 4), MaxDrain: tt.maxDrain}}

			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got, want := readBody(t, resp), "ok"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := srv.newConns.Load(), tt.want; got != want {
				t.Errorf("connections opened = %d, want %d", got, want)
			}
		})
	}
}

func TestLogsMethodAndRedactedURL(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 503}, reply{status: 200})
	var logs bytes.Buffer
	policy := fixedPolicy(newClock(), 2)
	policy.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: policy}}
	url := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1) + "/items?id=7"

	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	resp.Body.Close()
	got := logs.String()
	for _, want := range []string{
		"attempt 1/2 failed; retrying in 10ms",
		"method=GET",
		`url="` + strings.Replace(srv.URL, "http://", "http://alice:xxxxx@", 1) + `/items?id=7"`,
		"http status 503 Service Unavailable",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q does not contain %q", got, want)
		}
	}
	if strings.Contains(got, "s3cret") {
		t.Errorf("log %q shows the password", got)
	}
}

// newSlowBodyServer answers with its headers and the start of its body at
// once, and with the rest of the body when release is closed.
func newSlowBodyServer(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "head+")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "tail")
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// A 101 Switching Protocols body stays writable with an attempt timeout.
func TestUpgradedBodyWritable(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = rw.Flush()
		line, _ := rw.ReadString('\n')
		_, _ = rw.WriteString(line)
		_ = rw.Flush()
	}))
	t.Cleanup(ts.Close)
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 2), AttemptTimeout: 5 * time.Second}}
	req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")

	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body %T is not an io.ReadWriteCloser", resp.Body)
	}
	if _, err := io.WriteString(rwc, "ping\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := bufio.NewReader(rwc).ReadString('\n')
	if err != nil || got != "ping\n" {
		t.Errorf("echo = %q, %v; want %q", got, err, "ping\n")
	}
}
