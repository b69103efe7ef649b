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

// bothClients sends r to the handler h over http:// (h1) and https://
// (net/http), concurrently, and returns both results and what the target
// saw as Host.
func bothClients(t *testing.T, h http.HandlerFunc, r dispatch.Request, timeout time.Duration) (plain, secure dispatch.Result, plainHost, secureHost string) {
	t.Helper()
	run := func(useTLS bool, res *dispatch.Result, host *string) {
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
		d := dispatch.New(cfg)
		defer d.Close()
		rr := r
		rr.URL = srv.URL + r.URL
		*res = d.Send(context.Background(), rr)
		mu.Lock()
		if *host == strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://") {
			*host = "the target"
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { run(false, &plain, &plainHost) })
	wg.Go(func() { run(true, &secure, &secureHost) })
	wg.Wait()
	return
}

// rawToBothClients serves the raw response, byte for byte, over a plain and a
// TLS listener (HTTP/1.1 over TLS, so net/http parses the same bytes), and
// sends a GET to each.
func rawToBothClients(t *testing.T, response string) (plain, secure dispatch.Result) {
	t.Helper()
	return serveToBothClients(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, response)
	}, dispatch.Request{Method: "GET"})
}

// serveToBothClients serves each connection with serve over a plain and a
// TLS listener and sends r (its URL set) to each.
func serveToBothClients(t *testing.T, serve func(net.Conn), r dispatch.Request) (plain, secure dispatch.Result) {
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
	var wg sync.WaitGroup
	wg.Go(func() {
		rr := r
		rr.URL = "http://" + pln.Addr().String()
		plain = d.Send(context.Background(), rr)
	})
	wg.Go(func() {
		rr := r
		rr.URL = "https://" + tln.Addr().String()
		secure = d.Send(context.Background(), rr)
	})
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
	plain, secure := serveToBothClients(t, serve, r)
	if plain.Status != secure.Status || (plain.Err == nil) != (secure.Err == nil) {
		t.Fatalf("http: %d, %v after %v\nhttps: %d, %v after %v", plain.Status, plain.Err, plain.Duration, secure.Status, secure.Err, secure.Duration)
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
			p, s, _, _ := bothClients(t, h, dispatch.Request{Method: "GET", URL: "/"}, 500*time.Millisecond)
			if p.RetryAfter != s.RetryAfter || p.HasRetryAfter != s.HasRetryAfter || p.Location != s.Location {
				t.Fatalf("http: retry after %v %v, location %q\nhttps: retry after %v %v, location %q",
					p.RetryAfter, p.HasRetryAfter, p.Location, s.RetryAfter, s.HasRetryAfter, s.Location)
			}
		})
	}
}

// A task's empty Host header names no host: the URL's is sent, as by
// net/http.
func TestParityEmptyHostHeader(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) {}
	_, _, ph, sh := bothClients(t, ok, dispatch.Request{Method: "GET", URL: "/", Headers: map[string]string{"Host": ""}}, 500*time.Millisecond)
	if ph != sh {
		t.Fatalf("the target saw Host %q over http, %q over https", ph, sh)
	}
}

// A 101 to a request that asked for no upgrade is an answer (it fails
// the attempt), as net/http reports it.
func TestParitySwitchingProtocols(t *testing.T) {
	t.Parallel()
	p, s := rawToBothClients(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	pol := &retry.Policy{}
	if p.Status != s.Status || p.Outcome(pol) != s.Outcome(pol) {
		t.Fatalf("http: %d %v (%v)\nhttps: %d %v (%v)", p.Status, p.Err, p.Outcome(pol), s.Status, s.Err, s.Outcome(pol))
	}
}

// Responses at the edges of the grammar read the same through both
// clients: the same bytes from the same target.
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
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, s := rawToBothClients(t, resp)
			if p.Status != s.Status || p.Body != s.Body || p.Location != s.Location || (p.Err == nil) != (s.Err == nil) {
				t.Fatalf("http: %d %q %q %v\nhttps: %d %q %q %v", p.Status, p.Body, p.Location, p.Err, s.Status, s.Body, s.Location, s.Err)
			}
		})
	}
}

// A cancellation while a large body is being written to a target that
// reads nothing: the write loop's short deadlines must not outlast it.
func TestSendCancelledDuringTheBody(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	url := serveTCP(t, func(net.Conn, int) { <-done })
	t.Cleanup(func() { close(done) })
	d := newDispatcher(t, dispatch.Config{Timeout: 5 * time.Second})
	for _, at := range []time.Duration{0, 10 * time.Millisecond, 75 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		if at == 0 {
			cancel()
		} else {
			time.AfterFunc(at, cancel)
		}
		res := d.Send(ctx, dispatch.Request{Method: "POST", URL: url, Body: make([]byte, 8<<20)})
		cancel()
		if !errors.Is(res.Err, context.Canceled) || res.Duration > at+100*time.Millisecond {
			t.Fatalf("cancelled at %v: %d, %v after %v", at, res.Status, res.Err, res.Duration)
		}
	}
}
