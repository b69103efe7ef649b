package main_test

import (
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hashed is what a target saw of a request body.
type hashed struct {
	length, n int64
	sum       [32]byte
}

// hashingTarget answers 503 to the first request and 200 to the others,
// after hashing each body, which it does not keep.
func hashingTarget(t *testing.T) (url string, seen func() []hashed) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []hashed
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			return
		}
		g := hashed{length: r.ContentLength, n: n}
		h.Sum(g.sum[:0])
		mu.Lock()
		got = append(got, g)
		first := len(got) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []hashed {
		mu.Lock()
		defer mu.Unlock()
		return append([]hashed(nil), got...)
	}
}

// A body over the blob threshold goes to the embedded blob store, and each
// attempt sends all of it from there.
func TestLargeBodySentFromTheBlobStore(t *testing.T) {
	t.Parallel()
	url, seen := hashingTarget(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	d.putPolicy("quick", quick)
	body := strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB
	var created struct {
		task
		BodyRef string `json:"bodyRef"`
	}
	d.call("POST", "/retry-tasks", map[string]any{"targetUrl": url, "policyId": "quick", "body": body}, http.StatusCreated, &created)
	if !strings.HasPrefix(created.BodyRef, "blob:sha256:") {
		t.Fatalf("bodyRef %q: the body was not put in the blob store", created.BodyRef)
	}
	if got := d.waitTask(created.TaskID, terminal); got.Status != "SUCCEEDED" || got.AttemptNumber != 2 {
		t.Fatalf("task %+v, want SUCCEEDED after 2 attempts", got)
	}
	want := sha256.Sum256([]byte(body))
	got := seen()
	if len(got) != 2 {
		t.Fatalf("target saw %d requests, want 2", len(got))
	}
	for i, g := range got {
		if g.length != int64(len(body)) || g.n != int64(len(body)) || g.sum != want {
			t.Errorf("attempt %d: target got Content-Length %d, %d bytes, sha256 %x; want the %d bytes given",
				i+1, g.length, g.n, g.sum[:6], len(body))
		}
	}
}

// A blob deleted behind retryd's back: the attempts fail, saying so, and the
// task is exhausted by its policy; nothing reaches the target.
func TestDeletedBlobExhaustsTheTask(t *testing.T) {
	t.Parallel()
	url, seen := hashingTarget(t)
	db := newDB(t)
	d := startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	d.putPolicy("p", map[string]any{"backoff": "FIXED", "initialDelayMs": 20, "jitterType": "NONE", "maxAttempts": 3})
	body := strings.Repeat("x", 1<<20)
	var created struct {
		task
		BodyRef string `json:"bodyRef"`
	}
	d.call("POST", "/retry-tasks", map[string]any{"targetUrl": url, "policyId": "p", "body": body,
		"notBefore": time.Now().Add(time.Second).UnixMilli()}, http.StatusCreated, &created)
	h, ok := strings.CutPrefix(created.BodyRef, "blob:sha256:")
	if !ok {
		t.Fatalf("bodyRef %q: the body was not put in the blob store", created.BodyRef)
	}
	if err := os.Remove(filepath.Join(strings.TrimSuffix(db, ".db")+".blobs", "sha256", h[:2], h)); err != nil {
		t.Fatal(err)
	}
	got := d.waitTask(created.TaskID, terminal)
	want := "body: blob not found: " + created.BodyRef
	if got.Status != "EXHAUSTED" || got.AttemptNumber != 3 || !strings.HasPrefix(got.LastError, want) {
		t.Fatalf("task %+v, want EXHAUSTED after 3 attempts, lastError %q", got, want)
	}
	for _, a := range d.attempts(created.TaskID) {
		if a.ErrorMessage != want {
			t.Errorf("attempt %+v, want error %q", a, want)
		}
	}
	if n := len(seen()); n != 0 {
		t.Errorf("target saw %d requests, want none", n)
	}
}
