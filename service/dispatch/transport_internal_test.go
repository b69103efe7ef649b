package dispatch

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var loopbackOnly = Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// Idle connections are bounded per host (MaxIdlePerHost) and in all (four
// times as many), counted however they end, and all closed by Close.
func TestIdleConnectionsBounded(t *testing.T) {
	t.Parallel()
	const hosts, perHost = 5, 4
	var (
		arrived sync.WaitGroup
		release = make(chan struct{})
	)
	arrived.Add(hosts * perHost)
	var urls []string
	for range hosts {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived.Done()
			<-release
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	d := New(Config{Guard: loopbackOnly, MaxIdlePerHost: 2})
	var wg sync.WaitGroup
	for _, u := range urls {
		for range perHost {
			wg.Go(func() {
				if res := d.Send(context.Background(), Request{Method: "GET", URL: u}); res.Status != 200 {
					t.Errorf("Send = %d, %v", res.Status, res.Err)
				}
			})
		}
	}
	arrived.Wait() // hosts*perHost connections open at once
	close(release)
	wg.Wait()
	if n, all := d.idle.Load(), d.client.IdleConnsCount(); n != int64(all) || n > 8 {
		t.Fatalf("%d idle connections counted, %d in the pools; want the same, at most 8", n, all)
	}
	d.Close()
	if n, all := d.idle.Load(), d.client.IdleConnsCount(); n != 0 || all != 0 {
		t.Fatalf("after Close: %d idle connections counted, %d in the pools; want none", n, all)
	}
}

// An https connection is kept and used again, like an http one: peek does
// not take what TLS sends on its own (session tickets) for an answer
// nobody asked for.
func TestTLSConnectionReused(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	d := New(Config{Guard: loopbackOnly, TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	t.Cleanup(d.Close)
	for range 3 {
		if res := d.Send(context.Background(), Request{Method: "GET", URL: srv.URL}); res.Status != 200 {
			t.Fatalf("Send = %d, %v", res.Status, res.Err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 requests, want 1", n)
	}
}
