package dispatch_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
)

// rawServer is a TCP server on 127.0.0.1 that answers each request with
// the next of its scripted responses, byte for byte, so that the tests can
// send what net/http's server never would. It records every request head
// and how many connections it accepted.
type rawServer struct {
	addr string

	mu       sync.Mutex
	script   []string
	requests []string
	conns    int
}

// Marks in a script entry: closeAfter hangs up once it is written; pause
// waits a little before writing what follows.
const (
	closeAfter = "\x00close"
	pause      = "\x00pause"
)

func newRawServer(t *testing.T, script ...string) *rawServer {
	t.Helper()
	s := &rawServer{script: script}
	s.addr = serveTCP(t, func(c net.Conn, n int) {
		s.mu.Lock()
		s.conns = max(s.conns, n)
		s.mu.Unlock()
		s.serve(c)
	})
	return s
}

// serveTCP serves each connection to a new listener on 127.0.0.1 with
// serve, on a goroutine of its own, and closes it when serve returns; n
// numbers the connections from 1. It returns the listener's http URL.
func serveTCP(t *testing.T, serve func(c net.Conn, n int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, n)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// skipRequestHead reads a request's line and header fields from br, up to
// their empty line.
func skipRequestHead(br *bufio.Reader) {
	for {
		if line, err := br.ReadString('\n'); err != nil || line == "\r\n" {
			return
		}
	}
}

func (s *rawServer) url() string { return s.addr }

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		var head strings.Builder
		_ = req.Header.Write(&head)
		s.mu.Lock()
		s.requests = append(s.requests, req.Method+" "+req.RequestURI+"\n"+head.String())
		if len(s.script) == 0 {
			s.mu.Unlock()
			_, _ = io.Copy(io.Discard, br) // no answer: wait for the client to give up
			return
		}
		resp := s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
		resp, hangUp := strings.CutSuffix(resp, closeAfter)
		for i, part := range strings.Split(resp, pause) {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := io.WriteString(c, part); err != nil {
				return
			}
		}
		if hangUp {
			return
		}
	}
}

func (s *rawServer) counts() (requests, conns int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests), s.conns
}

func newDispatcher(t *testing.T, cfg dispatch.Config) *dispatch.Dispatcher {
	t.Helper()
	if cfg.Guard.Allow == nil {
		cfg.Guard = loopback
	}
	d := dispatch.New(cfg)
	t.Cleanup(d.Close)
	return d
}

func get(d *dispatch.Dispatcher, url string) dispatch.Result {
	return d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
}

func TestFraming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		response string
		method   string
		status   int
		body     string
		reused   bool // whether the next request shares the connection
	}{
		{"content length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "GET", 200, "hello", true},
		{"chunked with trailers", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\nX-Trailer: t\r\n\r\n", "GET", 201, "hello", true},
		// Both framings: the chunks are read, and the connection kept, as
		// net/http keeps it.
		{"chunked wins over length", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"2\r\nhi\r\n0\r\n\r\n", "GET", 200, "hi", true},
		{"empty 204", "HTTP/1.1 204 No Content\r\n\r\n", "DELETE", 204, "", true},
		{"HEAD has no body", "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", "HEAD", 200, "", true},
		{"interim responses skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
			"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok", "POST", 202, "ok", true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", false},
		{"HTTP/1.0 runs to the end", "HTTP/1.0 200 OK\r\n\r\nuntil close" + closeAfter, "GET", 200, "until close", false},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", true},
		{"folded header", "HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", true},
		{"folded Connection", "HTTP/1.1 200 OK\r\nConnection: x-y,\r\n close\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, tt.response, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
			d := newDispatcher(t, dispatch.Config{})
			res := d.Send(context.Background(), dispatch.Request{Method: tt.method, URL: srv.url()})
			if res.Err != nil || res.Status != tt.status || res.Body != tt.body {
				t.Fatalf("Send = %d %q, %v; want %d %q", res.Status, res.Body, res.Err, tt.status, tt.body)
			}
			if res := get(d, srv.url()); res.Err != nil || res.Body != "next" {
				t.Fatalf("second Send = %d %q, %v; want 200 \"next\"", res.Status, res.Body, res.Err)
			}
			wantConns := 2
			if tt.reused {
				wantConns = 1
			}
			if _, conns := srv.counts(); conns != wantConns {
				t.Fatalf("%d connections for two requests, want %d", conns, wantConns)
			}
		})
	}
}

func TestMalformedResponses(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"not HTTP":               "SSH-2.0-OpenSSH_9.6\r\n\r\n",
		"HTTP/2 status line":     "HTTP/2 200\r\n\r\n",
		"short status":           "HTTP/1.1 20 OK\r\n\r\n",
		"bad length":             "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
		"negative length":        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"two lengths":            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"gzip transfer encoding": "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"no colon":               "HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
		// fasthttp reads up to 100 (net/http 5).
		"endless interim":  strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 101),
		"huge head":        "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 1<<20) + "\r\n\r\n",
		"head over 32 KiB": "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 32<<10) + "\r\nContent-Length: 0\r\n\r\n",
		"cut in the head":  "HTTP/1.1 200 OK\r\nContent-Le" + closeAfter,
	}
	for name, response := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, response)
			res := get(newDispatcher(t, dispatch.Config{}), srv.url())
			if res.Err == nil || res.Status != 0 {
				t.Fatalf("Send = %d, %v; want an error", res.Status, res.Err)
			}
			if got := res.Outcome(&retry.Policy{}); got != dispatch.Retry {
				t.Fatalf("Outcome = %v, want retry (a broken answer is like a dropped connection)", got)
			}
		})
	}
}

// A response head of up to 32 KiB is read (many Set-Cookie fields, a
// long Content-Security-Policy); a longer one is malformed (above).
func TestLargeHead(t *testing.T) {
	t.Parallel()
	var head strings.Builder
	for i := range 40 {
		fmt.Fprintf(&head, "Set-Cookie: c%d=%s\r\n", i, strings.Repeat("v", 700))
	}
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\n"+head.String()+"Content-Length: 2\r\n\r\nok")
	if res := get(newDispatcher(t, dispatch.Config{}), srv.url()); res.Err != nil || res.Status != 200 || res.Body != "ok" {
		t.Fatalf("Send = %d %q, %v; want 200 \"ok\" for a head of %d bytes", res.Status, res.Body, res.Err, head.Len())
	}
}

// Line ends of a bare LF, which RFC 9112 §2.2 allows a recipient to
// accept, are not: such a response is not read (fasthttp waits for CRLF),
// and the attempt fails as a retried network error. net/http, and the
// client of this package before fasthttp, read it.
func TestBareLFLineEndsAreNotRead(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"+closeAfter)
	res := get(newDispatcher(t, dispatch.Config{Timeout: 2 * time.Second}), srv.url())
	if res.Err == nil || res.Status != 0 || res.Outcome(&retry.Policy{}) != dispatch.Retry || res.Duration > time.Second {
		t.Fatalf("Send = %d %q, %v after %v; want a retried error as soon as the target hangs up", res.Status, res.Body, res.Err, res.Duration)
	}
}

func TestShortBodyIsNotReused(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 10\r\n\r\nabc"+closeAfter,
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	d := newDispatcher(t, dispatch.Config{})
	// The status came, so the attempt has its answer; the cut body is
	// what it is.
	if res := get(d, srv.url()); res.Status != 500 || res.Body != "abc" {
		t.Fatalf("Send = %d %q, %v; want 500 \"abc\"", res.Status, res.Body, res.Err)
	}
	if res := get(d, srv.url()); res.Status != 200 {
		t.Fatalf("second Send = %d, %v", res.Status, res.Err)
	}
	if _, conns := srv.counts(); conns != 2 {
		t.Fatalf("%d connections, want 2: a cut body leaves the connection unusable", conns)
	}
}

func TestLongBodyDropsTheConnection(t *testing.T) {
	t.Parallel()
	// The first 1,000 bytes come alone, so that the client has read all it
	// was sent when it stops at its cap; the rest follows later, where a
	// reused connection would take it for the next response.
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n"+strings.Repeat("x", 1000)+pause+strings.Repeat("y", 1000),
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	d := newDispatcher(t, dispatch.Config{KeepBytes: 4, MaxResponseBytes: 1000})
	if res := get(d, srv.url()); res.Status != 200 || res.Body != "xxxx" {
		t.Fatalf("Send = %d %q, %v", res.Status, res.Body, res.Err)
	}
	if res := get(d, srv.url()); res.Status != 200 || res.Err != nil {
		t.Fatalf("second Send = %d, %v", res.Status, res.Err)
	}
	if _, conns := srv.counts(); conns != 2 {
		t.Fatalf("%d connections, want 2: an unread body must not be taken for the next response", conns)
	}
}

// A target that hangs up on a connection while it sits idle (many do after
// a few seconds: Node.js after 5) costs the next attempt nothing, whether it
// may be sent twice (GET) or not (a POST without a key): the connection is
// seen closed before it is used, and the request goes out on a new one.
func TestReplacesAConnectionClosedWhileIdle(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			// The server answers, then hangs up while the connection sits idle.
			srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"+closeAfter,
				"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew")
			d := newDispatcher(t, dispatch.Config{})
			send := func() dispatch.Result {
				return d.Send(context.Background(), dispatch.Request{Method: method, URL: srv.url(), Body: []byte("x")})
			}
			if res := send(); res.Status != 200 {
				t.Fatalf("Send = %d, %v", res.Status, res.Err)
			}
			time.Sleep(20 * time.Millisecond) // let the close arrive
			if res := send(); res.Err != nil || res.Body != "new" {
				t.Fatalf("Send after the idle close = %d %q, %v; want the request sent on a new connection", res.Status, res.Body, res.Err)
			}
			if reqs, conns := srv.counts(); reqs != 2 || conns != 2 {
				t.Fatalf("%d requests on %d connections, want 2 on 2", reqs, conns)
			}
		})
	}
}

func TestRequestOnTheWire(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	d := newDispatcher(t, dispatch.Config{})
	d.Send(context.Background(), dispatch.Request{
		Method: "POST", URL: srv.url() + "/a/b?x=1&y=%20",
		Headers: map[string]string{"x-lower": "v", "Connection": "close", "Content-Length": "99",
			"Transfer-Encoding": "chunked", "User-Agent": "mine/1", "Cookie": "a=1;b", "content-type": "text/x"},
		Body: []byte("body"), IdempotencyKey: "k-1",
	})
	d.Send(context.Background(), dispatch.Request{Method: "GET", URL: srv.url()})
	d.Send(context.Background(), dispatch.Request{Method: "DELETE", URL: srv.url() + "/x"})
	srv.mu.Lock()
	defer srv.mu.Unlock()
	want := []string{
		"POST /a/b?x=1&y=%20\nContent-Length: 4\r\nContent-Type: text/x\r\nCookie: a=1;b\r\nIdempotency-Key: k-1\r\nUser-Agent: mine/1\r\nX-Lower: v\r\n",
		"GET /\nUser-Agent: retryd\r\n",
		"DELETE /x\nUser-Agent: retryd\r\n",
	}
	if len(srv.requests) != len(want) {
		t.Fatalf("server saw %d requests, want %d", len(srv.requests), len(want))
	}
	for i := range want {
		if srv.requests[i] != want[i] {
			t.Errorf("request %d:\n%s\nwant:\n%s", i, srv.requests[i], want[i])
		}
	}
}

func TestSendRefusesWhatCannotBeWritten(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t)
	d := newDispatcher(t, dispatch.Config{})
	for name, r := range map[string]dispatch.Request{
		"header value with CRLF": {Method: "GET", URL: srv.url(), Headers: map[string]string{"X": "a\r\nInjected: yes"}},
		"header name with space": {Method: "GET", URL: srv.url(), Headers: map[string]string{"X Y": "a"}},
		"method with space":      {Method: "GET /evil HTTP/1.1\r\n", URL: srv.url()},
		"host with space":        {Method: "GET", URL: srv.url(), Headers: map[string]string{"Host": "a b"}},
		"key with LF":            {Method: "GET", URL: srv.url(), IdempotencyKey: "k\nX: y"},
		"header given twice":     {Method: "GET", URL: srv.url(), Headers: map[string]string{"x-a": "1", "X-A": "2"}},
	} {
		res := d.Send(context.Background(), r)
		if !errors.Is(res.Err, dispatch.ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, res.Err)
		}
		if got := res.Outcome(&retry.Policy{}); got != dispatch.Fail {
			t.Errorf("%s: Outcome = %v, want fail", name, got)
		}
	}
	if reqs, conns := srv.counts(); conns != 0 {
		t.Fatalf("the server saw %d connections (%d requests), want none", conns, reqs)
	}
}

func TestSendCancelled(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t) // reads the request and never answers
	d := newDispatcher(t, dispatch.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	res := d.Send(ctx, dispatch.Request{Method: "GET", URL: srv.url()})
	if !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", res.Err)
	}
}

// A TLS handshake the target never answers is cut short by a
// cancellation at once, and by ConnectTimeout otherwise. The bounds are far
// apart (a cancellation long before a 10 s ConnectTimeout; a 300 ms one long
// before a 30 s Timeout), so that a loaded machine cannot blur them.
func TestSendCancelledDuringTheHandshake(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	url := strings.Replace(serveTCP(t, func(net.Conn, int) { <-done }), "http://", "https://", 1)
	d := newDispatcher(t, dispatch.Config{Timeout: 30 * time.Second, ConnectTimeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	res := d.Send(ctx, dispatch.Request{Method: "GET", URL: url})
	if !errors.Is(res.Err, context.Canceled) || res.Duration > 5*time.Second {
		t.Fatalf("cancelled at 50ms: %v after %v; want context.Canceled long before the 10s ConnectTimeout", res.Err, res.Duration)
	}
	d = newDispatcher(t, dispatch.Config{Timeout: 30 * time.Second, ConnectTimeout: 300 * time.Millisecond})
	res = d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
	if res.Err == nil || res.Duration < 300*time.Millisecond || res.Duration > 10*time.Second ||
		res.Outcome(&retry.Policy{}) != dispatch.Retry {
		t.Fatalf("not cancelled: %v after %v; want a retried error after ConnectTimeout", res.Err, res.Duration)
	}
}

// A target that never ends what it sends, where the body's bytes are not
// counted (the extension of a chunk), is read only so far: the attempt ends
// with the status it had, long before its deadline, and the connection is
// dropped.
func TestSendReadsABoundedAmount(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	url := serveTCP(t, func(c net.Conn, _ int) {
		skipRequestHead(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;")
		ext := []byte(strings.Repeat("a", 64<<10))
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := c.Write(ext); err != nil {
				return
			}
		}
	})
	d := newDispatcher(t, dispatch.Config{Timeout: 5 * time.Second})
	res := get(d, url)
	if res.Status != 200 || res.Body != "" || res.Duration > time.Second {
		t.Fatalf("Send = %d %q, %v after %v; want the 200, cut short", res.Status, res.Body, res.Err, res.Duration)
	}
}

func TestKeepsAnEarlyAnswer(t *testing.T) {
	t.Parallel()
	// The target reads the head only, answers 413 and hangs up on a body
	// larger than the socket buffers can hold.
	url := serveTCP(t, func(c net.Conn, _ int) {
		skipRequestHead(bufio.NewReader(c))
		_, _ = io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big!")
		time.Sleep(100 * time.Millisecond) // let the answer leave before the reset
	})
	d := newDispatcher(t, dispatch.Config{})
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: url,
		Body: make([]byte, 16<<20)})
	if res.Status != 413 || res.Body != "too big!" {
		t.Fatalf("Send = %d %q, %v; want the target's 413", res.Status, res.Body, res.Err)
	}
	if got := res.Outcome(&retry.Policy{}); got != dispatch.Fail {
		t.Fatalf("Outcome = %v, want fail", got)
	}
}
