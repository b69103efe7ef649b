package run_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

// What net/http answers before the API's handler runs is JSON in retryd
// too: a path its mux would redirect (a doubled slash) and headers over the
// server's limit (1 MiB, net/http's default).
func TestServeAnswersJSONBeforeTheAPI(t *testing.T) {
	t.Parallel()
	c, err := run.ParseConfig([]string{"--listen", "127.0.0.1:0", "--store", filepath.Join(t.TempDir(), "r.db")},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- run.Serve(ctx, c, slog.New(slog.DiscardHandler), ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	var addr string
	select {
	case a := <-ready:
		addr = a.String()
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}

	for _, tc := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"doubled slash", "GET //retry-tasks HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not_found"},
		{"dot segment", "POST /metrics/../retry-tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 404, "not_found"},
		{"oversized header", "GET /retry-tasks HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+8192) + "\r\n\r\n", 431, "headers_too_large"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		go io.WriteString(conn, tc.request) // answered before it is all read
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		var m struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" ||
			json.Unmarshal(body, &m) != nil || m.Error.Code != tc.code || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d %q Location %q, body %q; want %d, a JSON error %s", tc.name, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("Location"), body, tc.status, tc.code)
		}
	}
}
