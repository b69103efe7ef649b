package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

func TestCauseOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		msg    string
		want   string
	}{
		{503, "HTTP 503 Service Unavailable", "HTTP 503"},
		{404, "", "HTTP 404"},
		{302, "redirect not followed: HTTP 302 to https://x/", "HTTP 302"},
		{503, "context deadline exceeded", "HTTP 503"}, // a status wins
		{0, "context deadline exceeded", causeTimeout},
		{0, "read tcp 10.0.0.1:5->10.0.0.2:80: i/o timeout (time budget exhausted)", causeTimeout},
		{0, "dialing to the given TCP address timed out", causeTimeout},
		{0, "timeout", causeTimeout},
		{0, "dial tcp 10.0.0.2:80: connect: connection refused", causeRefused},
		{0, "read tcp 10.0.0.1:5->10.0.0.2:80: read: connection reset by peer", causeReset},
		{0, "connection closed before an answer came: EOF", causeReset},
		{0, "write tcp 10.0.0.1:5->10.0.0.2:80: write: broken pipe", causeReset},
		{0, "dial tcp: lookup nowhere.invalid: no such host", causeDNS},
		{0, "dial tcp: lookup example.com on 127.0.0.53:53: read udp 127.0.0.1:5->127.0.0.53:53: i/o timeout", causeDNS},
		{0, "tls: failed to verify certificate: x509: certificate signed by unknown authority", causeTLS},
		{0, "remote error: tls: handshake failure", causeTLS},
		{0, store.LeaseExpiredMessage, causeLeaseExpired},
		{0, store.LeaseExpiredMessage + " (attempts exhausted before attempt 4)", causeLeaseExpired},
		{0, "dial tcp 127.0.0.1:80: target address refused: 127.0.0.1 is loopback", causeTargetRefused},
		{0, "body blob:sha256:00ff: blob not found", causeBodyGone},
		{0, "body s3://bucket/key (10 of 20 bytes sent): unexpected EOF", causeBodyGone},
		{0, "body x: no blob store to read it from", causeBodyGone},
		{0, "interrupted: retryd shut down during the attempt", causeOther},
		{0, "time budget exhausted before attempt 1", causeOther},
		{0, "", causeOther},
	} {
		if got := causeOf(tc.status, tc.msg); got != tc.want {
			t.Errorf("causeOf(%d, %q) = %q, want %q", tc.status, tc.msg, got, tc.want)
		}
		if why := checkCause(causeOf(tc.status, tc.msg)); why != "" {
			t.Errorf("checkCause refuses causeOf's own %q: %s", causeOf(tc.status, tc.msg), why)
		}
	}
}

// The causes of what retryd's own dispatcher reports, made to happen:
// the matchers must fit the errors as they really read.
func TestCauseOfDispatchErrors(t *testing.T) {
	t.Parallel()
	loopback := dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(tlsSrv.Close)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := closed.Addr().String()
	closed.Close()

	// reset reads the request and resets the connection; silent reads it
	// and never answers.
	serve := func(handle func(c *net.TCPConn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					buf := make([]byte, 4096)
					_, _ = c.Read(buf)
					handle(c.(*net.TCPConn))
				}()
			}
		}()
		return ln.Addr().String()
	}
	resetAddr := serve(func(c *net.TCPConn) { _ = c.SetLinger(0); c.Close() })
	silentAddr := serve(func(c *net.TCPConn) { time.Sleep(5 * time.Second); c.Close() })

	for _, tc := range []struct {
		name  string
		guard dispatch.Guard
		req   dispatch.Request
		want  string
	}{
		{"status", loopback, dispatch.Request{URL: plain.URL}, "HTTP 503"},
		{"refused", loopback, dispatch.Request{URL: "http://" + refusedAddr + "/"}, causeRefused},
		{"reset", loopback, dispatch.Request{URL: "http://" + resetAddr + "/"}, causeReset},
		{"timeout", loopback, dispatch.Request{URL: "http://" + silentAddr + "/"}, causeTimeout},
		{"TLS to plain HTTP", loopback, dispatch.Request{URL: "https" + plain.URL[len("http"):]}, causeTLS},
		{"unknown certificate", loopback, dispatch.Request{URL: tlsSrv.URL}, causeTLS},
		{"DNS", loopback, dispatch.Request{URL: "http://nowhere.invalid/"}, causeDNS},
		{"guard", dispatch.Guard{}, dispatch.Request{URL: plain.URL}, causeTargetRefused},
		{"guard after a lookup", dispatch.Guard{}, dispatch.Request{URL: "http://localhost:" + plain.URL[len("http://127.0.0.1:"):]}, causeTargetRefused},
		{"no blob store", loopback, dispatch.Request{URL: plain.URL, BodyRef: "blob:sha256:" + "00"}, causeBodyGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Only the silent target needs the attempt to time out, long
			// before its 5 s; every other cause must come before the
			// timeouts, even from a TLS handshake on a loaded machine (one
			// gave "context deadline exceeded" after 0.41 s against 300 ms).
			timeout := 30 * time.Second
			if tc.want == causeTimeout {
				timeout = 300 * time.Millisecond
			}
			d := dispatch.New(dispatch.Config{Guard: tc.guard, Timeout: timeout, ConnectTimeout: 30 * time.Second})
			t.Cleanup(d.Close)
			tc.req.Method = http.MethodPost
			res := d.Send(context.Background(), tc.req)
			if got := causeOf(res.Status, res.Message()); got != tc.want {
				t.Errorf("cause of %d %q = %q, want %q", res.Status, res.Message(), got, tc.want)
			}
		})
	}
}
