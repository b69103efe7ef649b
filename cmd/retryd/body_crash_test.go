package main_test

import (
	"bytes"
	"context"
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
// bodies streaming into the blob store) and attempted (their bodies
// streaming out of it): after a restart on the same store and blobs, every
// task whose create was acknowledged succeeds, the target has had its
// exact bytes, every task in the store has its whole blob, and nothing
// else was sent. Here on the embedded store and blob store.
func TestKill9WithLargeBodiesInFlight(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	blobDir := strings.TrimSuffix(db, ".db") + ".blobs"
	kill9LargeBodies(t, func() *daemon { return startDaemon(t, db, "--allow-target", "127.0.0.1/32") },
		func(ref string) ([32]byte, bool) {
			h, ok := strings.CutPrefix(ref, "blob:sha256:")
			return hexSum(h, ok)
		},
		func(ref string) (int64, [32]byte, error) {
			h := strings.TrimPrefix(ref, "blob:sha256:")
			b, err := os.ReadFile(filepath.Join(blobDir, "sha256", h[:2], h))
			return int64(len(b)), sha256.Sum256(b), err
		})
}

// The same on PostgreSQL and S3.
func TestKill9WithLargeBodiesInFlightPostgresS3(t *testing.T) {
	t.Parallel()
	b := postgresBackend(t)
	place := newS3Place(t)
	refPrefix := strings.TrimSuffix(place.store.Ref([32]byte{}), strings.Repeat("0", 64))
	kill9LargeBodies(t, func() *daemon {
		return startDaemonEnv(t, place.env, b.store, append([]string{"--blobs", place.spec, "--allow-target", "127.0.0.1/32"}, b.flags...)...)
	},
		func(ref string) ([32]byte, bool) {
			h, ok := strings.CutPrefix(ref, refPrefix)
			return hexSum(h, ok)
		},
		func(ref string) (int64, [32]byte, error) {
			r, _, err := place.store.Open(context.Background(), ref)
			if err != nil {
				return 0, [32]byte{}, err
			}
			defer r.Close()
			h := sha256.New()
			n, err := io.Copy(h, r)
			return n, [32]byte(h.Sum(nil)), err
		})
}

func hexSum(h string, ok bool) ([32]byte, bool) {
	b, err := hex.DecodeString(h)
	if !ok || err != nil || len(b) != 32 {
		return [32]byte{}, false
	}
	return [32]byte(b), true
}

// kill9LargeBodies runs the test on the retryd start starts, refSum
// giving the SHA-256 a bodyRef names, and blob reading the blob of one.
func kill9LargeBodies(t *testing.T, start func() *daemon, refSum func(ref string) ([32]byte, bool),
	blob func(ref string) (int64, [32]byte, error)) {
	t.Helper()
	target := newSlowHashingTarget(t)
	d := start()
	d.putPolicy("quick", quick)

	const n = 20
	bodies := make([]string, n)
	sums := map[[32]byte]int{} // of every body the test submits
	for i := range bodies {
		bodies[i] = randomText(2<<20 + i*(3<<20)/(n-1)) // 2 to 5 MiB
		sums[sha256.Sum256([]byte(bodies[i]))] = i
	}
	var (
		mu     sync.Mutex
		acked  = map[int]string{} // body index → task ID, of the creates answered 201
		next   atomic.Int64
		failed atomic.Int64 // creates that got no answer
		wg     sync.WaitGroup
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
					failed.Add(1) // killed: not acknowledged
					continue
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

	d = start()
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
		sum, ok := refSum(tk.BodyRef)
		if !ok {
			t.Errorf("task %s: bodyRef %q, want one in the blob store", tk.TaskID, tk.BodyRef)
			continue
		}
		storedSums[sum] = true
		i, ok := sums[sum]
		if !ok {
			t.Errorf("task %s: bodyRef %s is none of the bodies submitted", tk.TaskID, tk.BodyRef)
			continue
		}
		if tk.BodySize != int64(len(bodies[i])) {
			t.Errorf("task %s: bodySize %d, want %d", tk.TaskID, tk.BodySize, len(bodies[i]))
		}
		if size, bsum, err := blob(tk.BodyRef); err != nil || bsum != sum {
			t.Errorf("task %s: its blob: %d bytes, %v; want its %d bytes", tk.TaskID, size, err, len(bodies[i]))
		}
		if got[sum] == 0 {
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
	t.Logf("killed with %d/%d creates acknowledged (%d got no answer) and %d bodies sent; after the restart (%v): "+
		"%d tasks in the store, all SUCCEEDED; the target got %d whole bodies (%d duplicates) and %d broken off",
		ackedAtKill, n, failed.Load(), sentAtKill, time.Since(killed).Round(time.Millisecond), len(tasks), total, total-len(got), broken)
}
