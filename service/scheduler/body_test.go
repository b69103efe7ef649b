package scheduler_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// hashed is what a target saw of a request's body: its Content-Length,
// the bytes read, their SHA-256, and whether it was read to its end.
type hashed struct {
	length, n int64
	sum       [32]byte
	whole     bool
}

// hashingTarget answers the next status of script (the last one repeating)
// after hashing the body, which it does not keep.
func hashingTarget(t *testing.T, script ...int) (url string, seen func() []hashed) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []hashed
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		g := hashed{length: r.ContentLength, n: n, whole: err == nil}
		h.Sum(g.sum[:0])
		mu.Lock()
		status := script[min(len(got), len(script)-1)]
		got = append(got, g)
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []hashed {
		mu.Lock()
		defer mu.Unlock()
		return append([]hashed(nil), got...)
	}
}

// putBlob puts n pseudo-random bytes in a new embedded blob store.
func putBlob(t *testing.T, n int64) (*disk.Store, blob.Blob) {
	t.Helper()
	bs, err := disk.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(n))
	b, err := bs.Put(context.Background(), io.LimitReader(rand.NewChaCha8(seed), n))
	if err != nil {
		t.Fatal(err)
	}
	return bs, b
}

func addRefTask(t *testing.T, st store.Store, url string, b blob.Blob) *store.Task {
	t.Helper()
	task, _, err := st.TaskCreate(context.Background(), &store.Task{
		Tenant: tenant, TargetURL: url, Method: "POST", BodyRef: b.Ref, BodySize: b.Size, PolicyID: "p", RequestHash: "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// A task whose 20 MB body is in the embedded blob store: each attempt
// sends all of it, the same bytes, with its Content-Length.
func TestBodyRefSentOnEveryAttempt(t *testing.T) {
	t.Parallel()
	bs, b := putBlob(t, 20<<20)
	url, seen := hashingTarget(t, 503, 200)
	st := openStore(t, "")
	putPolicy(t, st, "p", fast(5))
	task := addRefTask(t, st, url, b)
	s, _ := start(t, st, options{disp: dispatch.Config{Blobs: bs}})
	s.Wake(store.Due{ID: task.ID, Version: task.Version})
	if done := waitFor(t, st, task.ID, terminal); done.Status != store.Succeeded || done.AttemptNumber != 2 {
		t.Fatalf("task = %s after %d attempts (%q), want SUCCEEDED after 2", done.Status, done.AttemptNumber, done.LastError)
	}
	got := seen()
	if len(got) != 2 {
		t.Fatalf("target saw %d requests, want 2", len(got))
	}
	for i, g := range got {
		if !g.whole || g.length != b.Size || g.n != b.Size || g.sum != b.SHA256 {
			t.Errorf("attempt %d: target got Content-Length %d, %d bytes, sha256 %x; want %d bytes, sha256 %x",
				i+1, g.length, g.n, g.sum[:6], b.Size, b.SHA256[:6])
		}
	}
}

// A blob deleted behind retryd's back: each attempt fails with a clear
// error, nothing is sent, and the task is retried until its policy gives
// up.
func TestBodyRefDeletedBlob(t *testing.T) {
	t.Parallel()
	bs, b := putBlob(t, 100<<10)
	url, seen := hashingTarget(t, 200)
	st := openStore(t, "")
	putPolicy(t, st, "p", fast(3))
	task := addRefTask(t, st, url, b)
	if err := bs.Delete(context.Background(), b.Ref); err != nil {
		t.Fatal(err)
	}
	s, _ := start(t, st, options{disp: dispatch.Config{Blobs: bs}})
	s.Wake(store.Due{ID: task.ID, Version: task.Version})
	done := waitFor(t, st, task.ID, terminal)
	want := "body: blob not found: " + b.Ref
	if done.Status != store.Exhausted || done.AttemptNumber != 3 || !strings.HasPrefix(done.LastError, want) {
		t.Fatalf("task = %s after %d attempts, last error %q; want EXHAUSTED after 3, %q", done.Status, done.AttemptNumber, done.LastError, want)
	}
	for _, a := range attempts(t, st, task.ID) {
		if a.ErrorMessage != want || a.ResponseStatus != 0 {
			t.Errorf("attempt %d: status %d, error %q; want %q", a.AttemptNumber, a.ResponseStatus, a.ErrorMessage, want)
		}
	}
	if n := len(seen()); n != 0 {
		t.Errorf("target saw %d requests, want none", n)
	}
}

// Without a blob store, a task holding its body by reference is never sent
// without it.
func TestBodyRefWithoutBlobStore(t *testing.T) {
	t.Parallel()
	_, b := putBlob(t, 10)
	url, seen := hashingTarget(t, 200)
	st := openStore(t, "")
	putPolicy(t, st, "p", fast(2))
	task := addRefTask(t, st, url, b)
	s, _ := start(t, st, options{})
	s.Wake(store.Due{ID: task.ID, Version: task.Version})
	done := waitFor(t, st, task.ID, terminal)
	if done.Status != store.Exhausted || !strings.Contains(done.LastError, "no blob store") {
		t.Fatalf("task = %s, last error %q; want EXHAUSTED, no blob store", done.Status, done.LastError)
	}
	if n := len(seen()); n != 0 {
		t.Errorf("target saw %d requests, want none", n)
	}
}
