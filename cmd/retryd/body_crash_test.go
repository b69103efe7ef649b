package main_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowHashingTarget hashes each request's body, holds the request 200ms
// and answers 200. It counts the whole bodies it got by SHA-256, and the
// requests whose body broke off.
type slowHashingTarget struct {
	*httptest.Server
	mu     sync.Mutex
	got    map[[32]byte]int
	broken int
	bad    []string // bodies whose length was not their Content-Length
}

func newSlowHashingTarget(t *testing.T) *slowHashingTarget {
	t.Helper()
	s := &slowHashingTarget{got: map[[32]byte]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		s.mu.Lock()
		if err != nil {
			s.broken++
			s.mu.Unlock()
			return
		}
		if n != r.ContentLength {
			s.bad = append(s.bad, fmt.Sprintf("Content-Length %d, %d bytes", r.ContentLength, n))
		}
		s.got[[32]byte(h.Sum(nil))]++
		s.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slowHashingTarget) received() (got map[[32]byte]int, total, broken int, bad []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	got = map[[32]byte]int{}
	for k, v := range s.got {
		got[k] = v
		total += v
	}
	return got, total, s.broken, append([]string(nil), s.bad...)
}

// listedTask is a task as GET /retry-tasks lists it.
type listedTask struct {
	TaskID    string `json:"taskId"`
	Status    string `json:"status"`
	LastError string `json:"lastError"`
	BodyRef   string `json:"bodyRef"`
	BodySize  int64  `json:"bodySize"`
}

// kill -9 of retryd while tasks with large bodies are being created (their
// bodies streaming into the embedded blob store) and attempted (their
// bodies streaming out of it): after a restart on the same files, every
// task whose create was acknowledged succeeds, the target has had its
// exact bytes, every task in the store has its whole blob, and nothing
// else was sent.
func TestKill9WithLargeBodiesInFlight(t *testing.T) {
	t.Parallel()
	target := newSlowHashingTarget(t)
	db := newDB(t)
	blobDir := strings.TrimSuffix(db, ".db") + ".blobs"
	d := startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	d.putPolicy("quick", quick)

	const n = 20
	bodies := make([]string, n)
	sums := map[[32]byte]int{} // of every body the test submits
	for i := range bodies {
		bodies[i] = randomText(2<<20 + i*(3<<20)/(n-1)) // 2 to 5 MiB
		sums[sha256.Sum256([]byte(bodies[i]))] = i
	}
	var (
		mu    sync.Mutex
		acked = map[int]string{} // body index → task ID, of the creates answered 201
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	c := &http.Client{Timeout: 30 * time.Second}
	url := d.url
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				b, _ := json.Marshal(map[string]any{"targetUrl": target.URL, "policyId": "quick", "body": bodies[i]})
				resp, err := c.Post(url+"/retry-tasks", "application/json", bytes.NewReader(b))
				if err != nil {
					continue // killed: not acknowledged
				}
				var got struct{ TaskID string }
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated && err == nil {
					mu.Lock()
					acked[i] = got.TaskID
					mu.Unlock()
				}
			}
		}()
	}
	// Kill once half the creates are acknowledged and attempts have begun,
	// while the other creates are still on their way.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(acked)
		mu.Unlock()
		_, sent, _, _ := target.received()
		if k >= n/2 && sent >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.kill()
	killed := time.Now()
	wg.Wait()
	mu.Lock()
	ackedAtKill := len(acked)
	mu.Unlock()
	_, sentAtKill, _, _ := target.received()

	d = startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	var tasks []listedTask
	deadline = time.Now().Add(25 * time.Second)
	for {
		var page struct{ Items []listedTask }
		d.call("GET", "/retry-tasks?limit=1000", nil, http.StatusOK, &page)
		tasks = page.Items
		done := true
		for _, tk := range tasks {
			if !terminal(task{Status: tk.Status}) {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks not finished 25s after the restart: %+v", tasks)
		}
		time.Sleep(20 * time.Millisecond)
	}

	got, total, broken, bad := target.received()
	inStore := map[string]bool{}
	storedSums := map[[32]byte]bool{}
	for _, tk := range tasks {
		inStore[tk.TaskID] = true
		if tk.Status != "SUCCEEDED" {
			t.Errorf("task %+v, want SUCCEEDED", tk)
		}
		h, ok := strings.CutPrefix(tk.BodyRef, "blob:sha256:")
		if !ok {
			t.Errorf("task %s: bodyRef %q, want one in the blob store", tk.TaskID, tk.BodyRef)
			continue
		}
		sum, err := hex.DecodeString(h)
		if err != nil || len(sum) != 32 {
			t.Errorf("task %s: bodyRef %q", tk.TaskID, tk.BodyRef)
			continue
		}
		storedSums[[32]byte(sum)] = true
		i, ok := sums[[32]byte(sum)]
		if !ok {
			t.Errorf("task %s: bodyRef %s is none of the bodies submitted", tk.TaskID, tk.BodyRef)
			continue
		}
		if tk.BodySize != int64(len(bodies[i])) {
			t.Errorf("task %s: bodySize %d, want %d", tk.TaskID, tk.BodySize, len(bodies[i]))
		}
		b, err := os.ReadFile(filepath.Join(blobDir, "sha256", h[:2], h))
		if err != nil || sha256.Sum256(b) != [32]byte(sum) {
			t.Errorf("task %s: its blob: %d bytes, %v; want its %d bytes", tk.TaskID, len(b), err, len(bodies[i]))
		}
		if got[[32]byte(sum)] == 0 {
			t.Errorf("task %s (body %d) SUCCEEDED, but the target never received its bytes whole", tk.TaskID, i)
		}
	}
	for i, id := range acked {
		if !inStore[id] {
			t.Errorf("task %s (body %d): its create was acknowledged, but the store has lost it", id, i)
		}
	}
	for sum, k := range got {
		if !storedSums[sum] {
			t.Errorf("the target received %d times a body (sha256 %x) no task in the store holds", k, sum[:6])
		}
	}
	for _, b := range bad {
		t.Errorf("the target received a body whose length was not its Content-Length: %s", b)
	}
	if ackedAtKill == n {
		t.Logf("every create was acknowledged before the kill: none was in flight")
	}
	t.Logf("killed with %d/%d creates acknowledged and %d bodies sent; after the restart (%v): "+
		"%d tasks in the store, all SUCCEEDED; the target got %d whole bodies (%d duplicates) and %d broken off",
		ackedAtKill, n, sentAtKill, time.Since(killed).Round(time.Millisecond), len(tasks), total, total-len(got), broken)
}
