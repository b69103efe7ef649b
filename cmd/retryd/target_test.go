package main_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// flaky is a real HTTP target on 127.0.0.1. The path says how it behaves:
//
//	/fail/N    503 for the first N requests of an Idempotency-Key, then 200
//	/slow/N    like /fail/N, but every request first waits 300ms
//	/status/S  always S
//	/switch    503 until healthy is set, then 200
type flaky struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []request
	perKey  map[string]int
	healthy bool
	held    map[*http.Request]time.Time // /slow requests still waiting, by arrival
}

type request struct {
	path, key string
	status    int
	at        time.Time
}

func newFlaky(t *testing.T) *flaky {
	t.Helper()
	f := &flaky{perKey: map[string]int{}, held: map[*http.Request]time.Time{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *flaky) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.perKey[key]++
	n := f.perKey[key]
	healthy := f.healthy
	f.mu.Unlock()

	kind, arg, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	num, _ := strconv.Atoi(arg)
	status := http.StatusOK
	switch kind {
	case "slow":
		f.mu.Lock()
		f.held[r] = time.Now()
		f.mu.Unlock()
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
		f.mu.Lock()
		delete(f.held, r)
		f.mu.Unlock()
		if r.Context().Err() != nil {
			return
		}
		fallthrough
	case "fail":
		if n <= num {
			status = http.StatusServiceUnavailable
		}
	case "status":
		status = num
	case "switch":
		if !healthy {
			status = http.StatusServiceUnavailable
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, request{r.URL.Path, key, status, time.Now()})
	f.mu.Unlock()
	w.WriteHeader(status)
}

func (f *flaky) setHealthy() {
	f.mu.Lock()
	f.healthy = true
	f.mu.Unlock()
}

// holding counts the /slow requests waiting that arrived within d: each
// has at least 300ms−d to wait yet.
func (f *flaky) holding(d time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, at := range f.held {
		if time.Since(at) < d {
			n++
		}
	}
	return n
}

// requests returns the requests answered so far with key ("" for all).
func (f *flaky) requests(key string) []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []request
	for _, r := range f.reqs {
		if key == "" || r.key == key {
			out = append(out, r)
		}
	}
	return out
}

// received counts the requests that arrived with key, answered or not.
func (f *flaky) received(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.perKey[key]
}
