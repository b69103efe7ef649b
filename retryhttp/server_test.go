package retryhttp_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrytest"
)

// reply is one scripted answer of a server.
type reply struct {
	status     int
	retryAfter string // the Retry-After header, if not empty
	body       string // "" means "attempt N"
	hang       bool   // answer nothing until the client gives up
	drop       bool   // close the connection without answering
}

// received is what a server saw of one request.
type received struct {
	method, key, body string
}

// server is a real httptest server that answers the n-th request with the
// n-th reply (the last one repeats), records each request and counts the
// connections opened to it.
type server struct {
	URL string

	mu       sync.Mutex
	replies  []reply
	requests []received
	arrived  chan struct{} // a value per request, for tests that wait for one
	newConns atomic.Int64
}

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	s := &server{replies: replies, arrived: make(chan struct{}, 100)}
	done := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, done)
	}))
	ts.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.newConns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(done) }) // runs first: frees hanging handlers
	s.URL = ts.URL
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request, done <-chan struct{}) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, received{r.Method, r.Header.Get("Idempotency-Key"), string(body)})
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()
	s.arrived <- struct{}{}
	if rep.hang {
		select {
		case <-r.Context().Done():
		case <-done:
		}
		return
	}
	if rep.drop {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	w.WriteHeader(rep.status)
	if rep.body == "" {
		rep.body = fmt.Sprintf("attempt %d", n+1)
	}
	_, _ = io.WriteString(w, rep.body)
}

// received returns the requests seen so far.
func (s *server) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.requests...)
}

// newBase returns a transport of the test's own, so that connection counts
// do not mix with other tests'.
func newBase(t *testing.T) *http.Transport {
	t.Helper()
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// epoch is the fake clocks' start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixedPolicy waits exactly 10ms between attempts, by a fake clock, within a
// budget that never matters unless a test means it to.
func fixedPolicy(clock retry.Clock, attempts int) retry.Policy {
	return retry.Policy{
		MaxAttempts: attempts,
		Budget:      time.Hour,
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Max: time.Minute, Jitter: backoff.NoJitter},
		Clock:       clock,
	}
}

func newClock() *retrytest.Clock { return retrytest.NewClock(epoch) }

// readBody reads and closes resp's body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return string(b)
}
