package scheduler_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
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

// Another process holding the database's write lock makes every write of
// the store fail for a while; the scheduler retries its store calls with
// the core library's backoff and carries on once the lock is gone.
func TestStoreOutageIsRetried(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "retryd.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.WithBusyTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tg := newTarget(t, 503, 200)
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, tg.URL, "p")

	// The lock: an open write transaction on a second connection.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cfg := schedulerConfig(time.Hour)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	start(t, st, options{cfg: cfg})

	// Wait until a store call has failed and been retried, then unlock.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "op=store.TaskClaim") {
		if time.Now().After(deadline) {
			t.Fatalf("no retried store call logged:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(tg.seen()); n != 0 {
		t.Fatalf("target called %d times while the store could not claim", n)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Succeeded || got.AttemptNumber != 2 {
		t.Fatalf("task %s after %d attempts, want SUCCEEDED after 2", got.Status, got.AttemptNumber)
	}
}
