package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

var t0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// acknowledged makes a mix of changes through concurrent calls (so that
// they share commits) and returns the tasks as the store acknowledged them.
func acknowledged(t *testing.T, s *sqlite.Store) map[string]*store.Task {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.PolicyPut(ctx, &store.Policy{Tenant: "t", ID: "p", Spec: []byte(`{"maxAttempts":3}`), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	tasks := map[string]*store.Task{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				tk, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: fmt.Sprintf("k%d-%d", w, i),
					TargetURL: "http://127.0.0.1:9/", Method: "PUT", Body: []byte{byte(w), byte(i), 0}, BodyBinary: true,
					PolicyID: "p", CreatedAt: t0})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				tasks[tk.ID] = tk
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: time.Minute, Limit: 60})
	if err != nil || len(claimed) != 60 {
		t.Fatalf("TaskClaim = %d, %v", len(claimed), err)
	}
	statuses := []store.Status{store.Succeeded, store.Pending, store.Exhausted, store.Failed}
	for i, c := range claimed {
		wg.Go(func() {
			f := store.Finish{TaskID: c.ID, Version: c.Version, Status: statuses[i%4], NextAttemptAt: t0.Add(time.Hour),
				Now: t0, LastError: "e", Attempt: store.Attempt{AttemptNumber: 1, StartedAt: t0, ErrorMessage: "e"}}
			if errs, err := s.TaskFinish(ctx, []store.Finish{f}); err != nil || errs[0] != nil {
				t.Errorf("TaskFinish = %v, %v", errs, err)
			}
		})
	}
	wg.Wait()
	for i, c := range claimed {
		if st := statuses[i%4]; i >= 50 && (st == store.Exhausted || st == store.Failed) {
			if _, err := s.TaskTransition(ctx, store.Transition{Tenant: "t", TaskID: c.ID,
				From: []store.Status{store.Exhausted, store.Failed}, To: store.Pending, Now: t0}); err != nil {
				t.Fatalf("redrive = %v", err)
			}
		}
	}
	for id := range tasks {
		tk, err := s.TaskGet(ctx, "t", id)
		if err != nil {
			t.Fatal(err)
		}
		tasks[id] = tk
	}
	return tasks
}

// same fails t unless s holds tasks exactly as they were acknowledged.
func same(t *testing.T, s *sqlite.Store, tasks map[string]*store.Task) {
	t.Helper()
	ctx := context.Background()
	for id, want := range tasks {
		got, err := s.TaskGet(ctx, "t", id)
		if err != nil {
			t.Fatalf("after reopening, TaskGet(%s) = %v", id, err)
		}
		if got.Status != want.Status || got.Version != want.Version || got.AttemptNumber != want.AttemptNumber ||
			!got.NextAttemptAt.Equal(want.NextAttemptAt) || string(got.Body) != string(want.Body) {
			t.Errorf("after reopening task %s = %s v%d #%d next %v, want %s v%d #%d next %v", id, got.Status,
				got.Version, got.AttemptNumber, got.NextAttemptAt, want.Status, want.Version, want.AttemptNumber,
				want.NextAttemptAt)
		}
	}
	if _, err := s.PolicyGet(ctx, "t", "p"); err != nil {
		t.Errorf("after reopening, PolicyGet = %v", err)
	}
}

func TestReopenAfterClose(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	tasks := acknowledged(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	same(t, again, tasks)
}

// TestFilesHoldAcknowledgedChanges copies the database and its WAL while
// the store is still open, as a crash would leave them (the shared-memory
// index is rebuilt from the WAL), and opens the copy.
func TestFilesHoldAcknowledgedChanges(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	defer s.Close()
	tasks := acknowledged(t, s)
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(copyPath+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copied, err := sqlite.Open(context.Background(), copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	same(t, copied, tasks)
}

// TestKilledWriter runs a child process that creates tasks and prints each
// one's key once TaskCreate returned, kills it with SIGKILL mid-stream, and
// checks that the file holds every task the child saw acknowledged.
func TestKilledWriter(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "killed.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterChild$")
	cmd.Env = append(os.Environ(), "SQLITE_CHILD_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	for lines.Scan() && len(acked) < 300 {
		if key, ok := strings.CutPrefix(lines.Text(), "ack "); ok {
			acked = append(acked, key)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("child acknowledged %d creates before it stopped, want 300", len(acked))
	}
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, key := range acked {
		_, created, err := s.TaskCreate(context.Background(), &store.Task{Tenant: "t", IdempotencyKey: key, RequestHash: "h"})
		if err != nil || created {
			t.Errorf("acknowledged task %s: created %v, %v; want it found", key, created, err)
		}
	}
}

// TestKilledWriterChild is TestKilledWriter's child: it writes until killed.
func TestKilledWriterChild(t *testing.T) {
	path := os.Getenv("SQLITE_CHILD_DB")
	if path == "" {
		t.Skip("run by TestKilledWriter")
	}
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("k%d-%d", w, i)
				if _, _, err := s.TaskCreate(context.Background(), &store.Task{Tenant: "t", IdempotencyKey: key,
					RequestHash: "h", Method: "POST", TargetURL: "http://127.0.0.1:9/"}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				fmt.Println("ack", key)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
