package dispatch

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nto the end",
		"HTTP/1.1 302 Found\r\nLocation: /x\r\nRetry-After: 3\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 200 OK\nX: a\n b\nContent-Length: 0\n\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 64)
		h, err := readHead(br, method)
		if err != nil {
			return
		}
		if h.status < 100 || h.status > 999 || interim(h.status) {
			t.Fatalf("final status %d", h.status)
		}
		n, err := io.Copy(io.Discard, h.body)
		if n > int64(len(data)) {
			t.Fatalf("read %d body bytes from %d of input", n, len(data))
		}
		if err == nil && !h.body.done {
			t.Fatalf("body read to its end without being done")
		}
		if h.body.done && h.body.length > 0 {
			t.Fatalf("done with %d bytes of its length left", h.body.length)
		}
	})
}

// closeCounter is a connection that remembers being closed.
type closeCounter struct {
	net.Conn
	closed atomic.Bool
}

func (c *closeCounter) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func TestPoolLimitsAndReaping(t *testing.T) {
	t.Parallel()
	p := pool{perHost: 2, total: 3, idleTimeout: 50 * time.Millisecond}
	conn := func(addr string) *h1Conn {
		c, other := net.Pipe()
		t.Cleanup(func() { other.Close() })
		return &h1Conn{c: &closeCounter{Conn: c}, addr: addr}
	}
	closed := func(c *h1Conn) bool { return c.c.(*closeCounter).closed.Load() }
	a1, a2, a3, b1, c1 := conn("a"), conn("a"), conn("a"), conn("b"), conn("c")
	for _, c := range []*h1Conn{a1, a2, a3, b1, c1} {
		p.put(c)
	}
	// a3 found its host full, c1 the pool: both were closed.
	if !closed(a3) || !closed(c1) || closed(a1) || closed(a2) || closed(b1) {
		t.Fatalf("closed: a1 %v a2 %v a3 %v b1 %v c1 %v; want only a3 and c1",
			closed(a1), closed(a2), closed(a3), closed(b1), closed(c1))
	}
	if got := p.get("a"); got != a2 {
		t.Fatal("get did not return the most recently used connection")
	}
	p.put(a2)
	time.Sleep(200 * time.Millisecond)
	if got := p.get("a"); got != nil {
		t.Fatal("a connection idle past the timeout was handed out")
	}
	p.mu.Lock()
	n, reaper := p.n, p.reaper
	p.mu.Unlock()
	if n != 0 || reaper != nil {
		t.Fatalf("after reaping: %d idle, reaper %v; want none", n, reaper)
	}
	if !closed(a1) || !closed(a2) || !closed(b1) {
		t.Fatal("reaped connections left open")
	}
}
