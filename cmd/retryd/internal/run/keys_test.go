package run_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

// serveUntilReady runs retryd with args until it listens, and returns its
// address and a func that stops it; or, when it fails to start, its error.
func serveUntilReady(t *testing.T, args ...string) (addr string, stop func(), err error) {
	t.Helper()
	c, err := run.ParseConfig(append([]string{"--listen", "127.0.0.1:0"}, args...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- run.Serve(ctx, c, slog.New(slog.DiscardHandler), ready) }()
	select {
	case a := <-ready:
		return a.String(), func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}, nil
	case err := <-done:
		cancel()
		return "", nil, err
	}
}

// TestMissingKeyFileIsNotReplaced: the embedded store's key file is made at
// first start; once destinations are sealed under it, a retryd that finds
// it gone refuses to start rather than make a new key that opens none of
// them, and starts again once the file is back.
func TestMissingKeyFileIsNotReplaced(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "r.db")
	addr, stop, err := serveUntilReady(t, "--store", db)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/destinations", "application/json",
		strings.NewReader(`{"destinationId":"d","url":"https://example.com","auth":{"type":"bearer","token":"t"}}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a destination: %v %v", resp, err)
	}
	resp.Body.Close()
	stop()

	key := db + ".key"
	saved, err := os.ReadFile(key)
	if err != nil {
		t.Fatalf("the key file was not made beside the store: %v", err)
	}
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := serveUntilReady(t, "--store", db); err == nil || !strings.Contains(err.Error(), "put the key file back") {
		t.Fatalf("Serve without its key file = %v, want a refusal", err)
	}
	if _, err := os.Stat(key); !os.IsNotExist(err) {
		t.Errorf("the refused start left a key file: %v", err)
	}
	if err := os.WriteFile(key, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stop, err = serveUntilReady(t, "--store", db)
	if err != nil {
		t.Fatalf("Serve with its key file back: %v", err)
	}
	stop()
}
