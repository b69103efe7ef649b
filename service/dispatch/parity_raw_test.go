package dispatch_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
)

// The Dispatcher reads a response as net/http's client would: each test
// here sends the same request to the same target through the Dispatcher,
// over http:// and https://, and through net/http (dispatch.NetHTTP, the
// reference), and holds the Dispatcher to what net/http made of it.

// triple is what one request came to through each.
type triple struct {
	plain, secure, ref dispatch.Result
}

// sameAsNetHTTP fails unless both of the Dispatcher's results read the
// response as the reference did: status, kept body, Location, Retry-After,
// whether an error came instead, and the outcome. The errors' texts differ.
func (tr triple) sameAsNetHTTP(t *testing.T) {
	t.Helper()
	pol := &retry.Policy{}
	for _, got := range []struct {
		name string
		res  dispatch.Result
	}{{"http", tr.plain}, {"https", tr.secure}} {
		p, r := got.res, tr.ref
		// A Retry-After date is read against each attempt's own start.
		if p.Status != r.Status || p.Body != r.Body || p.Location != r.Location || (p.RetryAfter-r.RetryAfter).Abs() >= time.Second ||
			p.HasRetryAfter != r.HasRetryAfter || (p.Err == nil) != (r.Err == nil) || p.Outcome(pol) != r.Outcome(pol) {
			t.Errorf("%s: %d %q location %q retry after %v %v, err %v (%v)\nnet/http: %d %q location %q retry after %v %v, err %v (%v)",
				got.name, p.Status, p.Body, p.Location, p.RetryAfter, p.HasRetryAfter, p.Err, p.Outcome(pol),
				r.Status, r.Body, r.Location, r.RetryAfter, r.HasRetryAfter, r.Err, r.Outcome(pol))
		}
	}
}

// handlerToAll sends r to the handler h over http:// and https://
// through the Dispatcher and over http:// through net/http, and returns
// the results and what the target saw as Host each time.
func handlerToAll(t *testing.T, h http.HandlerFunc, r dispatch.Request, timeout time.Duration) (res triple, plainHost, secureHost, refHost string) {
	t.Helper()
	run := func(useTLS, ref bool, res *dispatch.Result, host *string) {
		var mu sync.Mutex
		wrapped := func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			*host = req.Host
			mu.Unlock()
			h(w, req)
		}
		cfg := dispatch.Config{Guard: loopback, KeepBytes: 64, Timeout: timeout}
		var srv *httptest.Server
		if useTLS {
			srv = httptest.NewTLSServer(http.HandlerFunc(wrapped))
			cfg.TLS = srv.Client().Transport.(*http.Transport).TLSClientConfig
		} else {
			srv = httptest.NewServer(http.HandlerFunc(wrapped))
		}
		defer srv.Close()
		rr := r
		rr.URL = srv.URL + r.URL
		if ref {
			n := dispatch.NewNetHTTP(cfg.TLS, cfg.KeepBytes, 0, timeout)
			defer n.Close()
			*res = n.Send(context.Background(), rr)
		} else {
			d := dispatch.New(cfg)
			defer d.Close()
			*res = d.Send(context.Background(), rr)
		}
		mu.Lock()
		if *host == strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://") {
			*host = "the target"
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { run(false, false, &res.plain, &plainHost) })
	wg.Go(func() { run(true, false, &res.secure, &secureHost) })
	wg.Go(func() { run(false, true, &res.ref, &refHost) })
	wg.Wait()
	return
}

// rawToAll serves the raw response, byte for byte, over a plain and a TLS
// listener, and sends a GET to each through the Dispatcher and to the
// plain one through net/http.
func rawToAll(t *testing.T, response string) triple {
	t.Helper()
	return serveToAll(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, response)
	}, dispatch.Request{Method: "GET"})
}

// serveToAll serves each connection with serve over a plain and a TLS
// listener and sends r (its URL set) to each through the Dispatcher, and
// to the plain one through net/http.
func serveToAll(t *testing.T, serve func(net.Conn), r dispatch.Request) (res triple) {
	t.Helper()
	certSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	certSrv.StartTLS()
	defer certSrv.Close()
	accept := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pln.Close()
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tln.Close()
	go accept(pln)
	go accept(tls.NewListener(tln, certSrv.TLS.Clone()))
	cfg := dispatch.Config{Guard: loopback, KeepBytes: 64, Timeout: 500 * time.Millisecond,
		TLS: certSrv.Client().Transport.(*http.Transport).TLSClientConfig}
	d := dispatch.New(cfg)
	defer d.Close()
	ref := dispatch.NewNetHTTP(nil, cfg.KeepBytes, 0, cfg.Timeout)
	defer ref.Close()
	send := func(res *dispatch.Result, url string, send func(context.Context, dispatch.Request) dispatch.Result) {
		rr := r
		rr.URL = url
		*res = send(context.Background(), rr)
	}
	var wg sync.WaitGroup
	wg.Go(func() { send(&res.plain, "http://"+pln.Addr().String(), d.Send) })
	wg.Go(func() { send(&res.secure, "https://"+tln.Addr().String(), d.Send) })
	wg.Go(func() { send(&res.ref, "http://"+pln.Addr().String(), ref.Send) })
	wg.Wait()
	return
}

// A target that sends an interim response (103 Early Hints here; an
// unsolicited 100 Continue does the same) before it reads a large body:
// the body must still go out whole, and the final answer count, as with
// net/http.
func TestParityInterimResponseDuringTheBody(t *testing.T) {
	t.Parallel()
	serve := func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
		time.Sleep(150 * time.Millisecond) // the client's writes block meanwhile
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
	r := dispatch.Request{Method: "POST", Body: make([]byte, 8<<20), IdempotencyKey: "k"}
	res := serveToAll(t, serve, r)
	res.sameAsNetHTTP(t)
	if res.plain.Status != 200 {
		t.Errorf("http: %d, %v after %v; want the final 200", res.plain.Status, res.plain.Err, res.plain.Duration)
	}
}

// Two Retry-After (or Location) fields: the first counts, as with
// net/http's Header.Get.
func TestParityRepeatedRetryAfterAndLocation(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]http.HandlerFunc{
		"retry after": func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Retry-After"] = []string{"5", "3600"}
			w.WriteHeader(http.StatusServiceUnavailable)
		},
		"location": func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Location"] = []string{"/first", "/second"}
			w.WriteHeader(http.StatusFound)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, _, _, _ := handlerToAll(t, h, dispatch.Request{Method: "GET", URL: "/"}, 500*time.Millisecond)
			res.sameAsNetHTTP(t)
		})
	}
}

// A task's empty Host header names no host: the URL's is sent, as by
// net/http.
func TestParityEmptyHostHeader(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) {}
	_, ph, sh, rh := handlerToAll(t, ok, dispatch.Request{Method: "GET", URL: "/", Headers: map[string]string{"Host": ""}}, 500*time.Millisecond)
	if ph != rh || sh != rh {
		t.Fatalf("the target saw Host %q over http, %q over https, %q from net/http", ph, sh, rh)
	}
}

// A 101 to a request that asked for no upgrade is an answer (it fails
// the attempt), as net/http reports it.
func TestParitySwitchingProtocols(t *testing.T) {
	t.Parallel()
	rawToAll(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n").sameAsNetHTTP(t)
}

// Responses at the edges of the grammar read as net/http reads them: the
// same bytes from the same target.
func TestParityHeadParsing(t *testing.T) {
	t.Parallel()
	for name, resp := range map[string]string{
		// A fold after an empty value adds no space.
		"folded Location, empty first line": "HTTP/1.1 302 Found\r\nLocation:\r\n /x\r\nContent-Length: 0\r\n\r\n",
		// net/http ignores Transfer-Encoding in HTTP/1.0 (golang/go#12785).
		"HTTP/1.0 chunked": "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		// A control character in a field value makes the response malformed.
		"CR in a value":    "HTTP/1.1 302 Found\r\nLocation: /x\r\r\nContent-Length: 0\r\n\r\n",
		"NUL in a value":   "HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 2\r\n\r\nok",
		"lengths 2 and 02": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 02\r\n\r\nok",
		"status 099":       "HTTP/1.1 099 Weird\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.2":         "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok",
		// More of the same, each read alike by both.
		"no reason phrase":        "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
		"status 600":              "HTTP/1.1 600 Beyond\r\nContent-Length: 2\r\n\r\nok",
		"space in a field name":   "HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok",
		"space before the colon":  "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
		"both framings":           "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		"chunked with trailers":   "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\nX-Trailer: t\r\n\r\n",
		"HTTP/1.0 to the end":     "HTTP/1.0 200 OK\r\n\r\nuntil close",
		"interim responses":       "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok",
		"folded field":            "HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
		"folded Content-Length":   "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 0\r\n\r\n0123456789",
		"lengths 1 and 2":         "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"negative length":         "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"gzip transfer coding":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		"lower-case version":      "http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/2 status line":      "HTTP/2 200\r\n\r\n",
		"not HTTP":                "SSH-2.0-OpenSSH_9.6\r\n\r\n",
		"cut in the head":         "HTTP/1.1 200 OK\r\nContent-Le",
		"cut in the body":         "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
		"endless interim":         strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6),
		"Retry-After as a date":   "HTTP/1.1 503 Busy\r\nRetry-After: Wed, 21 Oct 2099 07:28:00 GMT\r\nContent-Length: 0\r\n\r\n",
		"Retry-After not a delay": "HTTP/1.1 503 Busy\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rawToAll(t, resp).sameAsNetHTTP(t)
		})
	}
}

// A cancellation while a large body is being written to a target that
// reads nothing: the write loop's short deadlines must not outlast it. The
// bound is far from the 30 s Timeout, so that a loaded machine cannot blur
// an ignored cancellation with a slow one.
func TestSendCancelledDuringTheBody(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	url := serveTCP(t, func(net.Conn, int) { <-done })
	t.Cleanup(func() { close(done) })
	d := newDispatcher(t, dispatch.Config{Timeout: 30 * time.Second})
	for _, at := range []time.Duration{0, 10 * time.Millisecond, 75 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		if at == 0 {
			cancel()
		} else {
			time.AfterFunc(at, cancel)
		}
		res := d.Send(ctx, dispatch.Request{Method: "POST", URL: url, Body: make([]byte, 8<<20)})
		cancel()
		if !errors.Is(res.Err, context.Canceled) || res.Duration > at+5*time.Second {
			t.Fatalf("cancelled at %v: %d, %v after %v", at, res.Status, res.Err, res.Duration)
		}
	}
}
