package dispatch_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/dispatch"
)

// Bytes a target sends after a response's framed end, once the connection
// is idle, must not be taken for the next request's response: the
// connection is dropped, as net/http drops it ("Unsolicited response
// received on idle HTTP channel").
func TestDropsAConnectionSpokenOnWhileIdle(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"+pause+"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nstale",
		"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
	d := newDispatcher(t, dispatch.Config{})
	if res := get(d, srv.url()); res.Status != 200 || res.Body != "ok" {
		t.Fatalf("first Send = %d %q, %v", res.Status, res.Body, res.Err)
	}
	time.Sleep(150 * time.Millisecond) // the extra bytes arrive while the connection is idle
	res := get(d, srv.url())
	if res.Status == 201 || res.Body == "stale" {
		t.Fatalf("second Send = %d %q: bytes sent before the request was written were taken for its response", res.Status, res.Body)
	}
}

// A target (Google's GFE, per golang/go#32310) that answers an idle
// connection with a 408 and hangs up: the next attempt goes out on a new
// connection and gets its own answer, as with net/http.
func TestResendsAfterAnIdle408(t *testing.T) {
	t.Parallel()
	url := serveTCP(t, func(c net.Conn, n int) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if n == 1 {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			time.Sleep(30 * time.Millisecond)
			_, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
	})
	d := newDispatcher(t, dispatch.Config{})
	if res := get(d, url); res.Status != 200 {
		t.Fatalf("first Send = %d, %v", res.Status, res.Err)
	}
	time.Sleep(150 * time.Millisecond)
	if res := get(d, url); res.Status != 200 || res.Body != "fresh" {
		t.Fatalf("second Send = %d %q, %v; want the request sent on a new connection and its 200", res.Status, res.Body, res.Err)
	}
}

// A target that reads a request and drops the connection without
// answering (a handler that crashes on this payload) looks like a pooled
// connection closed while idle. It must receive the request at most twice
// in one attempt, not once per pooled connection, and a POST without an
// Idempotency-Key only once (net/http's rule).
func TestResendsOnceOnANewConnection(t *testing.T) {
	t.Parallel()
	const pooled = 3
	var (
		mu      sync.Mutex
		first   int
		ready   = make(chan struct{})
		crashes atomic.Int32
	)
	url := serveTCP(t, func(c net.Conn, _ int) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if req.Method == "POST" {
				if i > 0 {
					crashes.Add(1)
					return // read it, then drop the connection: no answer
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				continue
			}
			mu.Lock()
			if first++; first == pooled {
				close(ready)
			}
			mu.Unlock()
			select {
			case <-ready:
			case <-time.After(time.Second):
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	d := newDispatcher(t, dispatch.Config{})
	var wg sync.WaitGroup
	for range pooled {
		wg.Go(func() { get(d, url) }) // three connections, then three idle ones
	}
	wg.Wait()
	d.Send(context.Background(), dispatch.Request{Method: "POST", URL: url, Body: []byte("x")})
	if n := crashes.Load(); n > 1 {
		t.Fatalf("one attempt delivered the POST on %d reused connections (plus a new one); want it resent at most once", n)
	}
}

// The target answers 413 after the head and neither reads the body nor
// hangs up: the answer is the attempt's, as soon as it comes, not a
// timeout once the deadline has passed.
func TestKeepsAnEarlyAnswerWithoutHangUp(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	url := serveTCP(t, func(c net.Conn, _ int) {
		skipRequestHead(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		<-done
	})
	t.Cleanup(func() { close(done) })
	d := newDispatcher(t, dispatch.Config{Timeout: 400 * time.Millisecond})
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: url,
		Body: make([]byte, 32<<20), IdempotencyKey: "k"})
	if res.Status != 413 {
		t.Fatalf("Send = %d, %v after %v; want the 413 the target sent at once", res.Status, res.Err, res.Duration)
	}
}

// A send in flight when Close is called closes its connection when it
// ends instead of keeping it idle.
func TestCloseClosesTheConnectionsOfSendsInFlight(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	url := serveTCP(t, func(c net.Conn, _ int) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		_, _ = br.ReadByte() // EOF once the client closes its side
		close(closed)
	})
	d := dispatch.New(dispatch.Config{Guard: loopback})
	time.AfterFunc(30*time.Millisecond, d.Close)
	if res := get(d, url); res.Status != 200 {
		t.Fatalf("Send = %d, %v", res.Status, res.Err)
	}
	select {
	case <-closed:
	case <-time.After(300 * time.Millisecond):
		d.Close()
		t.Fatal("the connection of a send that finished after Close is still open")
	}
}

// RFC 9112 §5.2: a user agent must replace obs-fold with SP before
// interpreting a field, so "Content-Length: 1" folded onto " 0" reads
// "1 0", which net/http rejects (bad Content-Length), and so does h1.
func TestFoldedContentLengthIsMalformed(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 0\r\n\r\n0123456789")
	if res := get(newDispatcher(t, dispatch.Config{}), srv.url()); res.Err == nil {
		t.Fatalf("Send = %d %q; want an error, as net/http gives, for a folded Content-Length", res.Status, res.Body)
	}
}

// A connection idle for longer than an attempt may last is still reused:
// the last attempt's deadline must not count against it.
func TestReusesAConnectionIdlePastTheAttemptTimeout(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	d := newDispatcher(t, dispatch.Config{Timeout: 100 * time.Millisecond})
	for range 2 {
		if res := get(d, srv.url()); res.Status != 200 {
			t.Fatalf("Send = %d, %v", res.Status, res.Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, conns := srv.counts(); conns != 1 {
		t.Fatalf("%d connections for two requests, want 1", conns)
	}
}
