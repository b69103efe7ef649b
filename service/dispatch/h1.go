package dispatch

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"
)

// h1 sends attempts to http:// targets itself, over pooled keep-alive
// HTTP/1.1 connections, on the attempt's own goroutine.
//
// Why not net/http: its Transport gives each connection a reader and a
// writer goroutine and passes every request and response between them and
// the caller. On a busy retryd those hand-offs cost more CPU than the rest
// of the attempt, store included, and every one of them waits in the
// runtime's run queue. An attempt needs little of what net/http offers
// (one request, a capped read, no redirects, proxies, cookies or
// compression), and this is that little. https:// targets still go
// through net/http, which brings TLS and HTTP/2.
type h1 struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	pool pool
}

// h1Conn is one connection and its buffers.
type h1Conn struct {
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	addr   string    // what it was dialled as: its pool key
	idleAt time.Time // when it went back to the pool
}

// errStale marks a pooled connection the target had closed while it sat
// idle: the request is sent again on a new one.
var errStale = errors.New("idle connection closed by the target")

// aLongTimeAgo is a deadline that interrupts a blocked read or write.
var aLongTimeAgo = time.Unix(1, 0)

// send makes the attempt r to u, an http URL, filling in res. readBody
// consumes the response body.
func (h *h1) send(ctx context.Context, u *url.URL, r *Request, res *Result, readBody func(io.Reader) string) error {
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	for {
		c, reused, err := h.conn(ctx, addr)
		if err != nil {
			return err
		}
		err = h.roundTrip(ctx, c, u, r, res, readBody, reused)
		// A connection found closed before it carried the request is
		// replaced once: the next one is new, so it cannot be stale. The
		// target may have received the request (that cannot be told
		// apart); the Idempotency-Key makes the second copy harmless,
		// which is also why net/http resends such requests.
		if errors.Is(err, errStale) {
			continue
		}
		return err
	}
}

// conn returns an idle connection to addr, or a new one.
func (h *h1) conn(ctx context.Context, addr string) (c *h1Conn, reused bool, err error) {
	if c := h.pool.get(addr); c != nil {
		return c, true, nil
	}
	nc, err := h.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &h1Conn{c: nc, br: bufio.NewReaderSize(nc, 4<<10), bw: bufio.NewWriterSize(nc, 4<<10), addr: addr}, false, nil
}

func (h *h1) roundTrip(ctx context.Context, c *h1Conn, u *url.URL, r *Request, res *Result, readBody func(io.Reader) string, reused bool) (err error) {
	// The context bounds every read and write: its deadline directly, its
	// cancellation by moving the deadline into the past.
	deadline, _ := ctx.Deadline()
	if err := c.c.SetDeadline(deadline); err != nil {
		c.c.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(aLongTimeAgo) })
	keep := false
	defer func() {
		if stop() && keep {
			h.pool.put(c)
			return
		}
		c.c.Close()
		if err != nil && (ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)) {
			err = contextErr(ctx)
		}
	}()

	writeRequest(c.bw, u, r)
	written := c.bw.Flush()
	if _, err := c.br.Peek(1); err != nil {
		return staleIf(reused, cmp.Or(written, err))
	}
	// A target may answer before it has read the whole request (a 413 for
	// a body too large, say) and stop reading: what it said is the
	// attempt's result, even though the rest of the request was refused.
	hd, err := readHead(c.br, r.Method)
	if err != nil {
		return cmp.Or(written, err)
	}
	res.Status = hd.status
	res.RetryAfter, res.HasRetryAfter = parseRetryAfter(hd.retryAfter, res.Start)
	if hd.status >= 300 && hd.status < 400 {
		res.Location = hd.location
	}
	res.Body = readBody(hd.body)
	// Reused only if the body was read to its end and nothing follows it:
	// anything else would be read as the next request's response.
	keep = written == nil && hd.keepAlive && hd.body.done && c.br.Buffered() == 0
	return nil
}

// staleIf marks err as errStale when it is how a reused connection that
// the target closed fails.
func staleIf(reused bool, err error) error {
	if reused && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return errStale
	}
	return err
}

// contextErr is the error of an attempt cut short by its context, whose
// deadline may have passed on the connection a moment before on ctx.
func contextErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// writeRequest writes the request line, the headers and the body of r to
// bw; checkRequest has vetted them.
func writeRequest(bw *bufio.Writer, u *url.URL, r *Request) {
	host := u.Host
	if h, ok := hostOverride(r.Headers); ok {
		host = h
	}
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(u.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	agent := false
	for k, v := range r.Headers {
		k = textproto.CanonicalMIMEHeaderKey(k)
		switch {
		case managed(k), k == "Idempotency-Key" && r.IdempotencyKey != "":
			continue
		case k == "User-Agent":
			agent = true
		}
		header(bw, k, v)
	}
	if !agent {
		header(bw, "User-Agent", defaultUserAgent)
	}
	if r.IdempotencyKey != "" {
		header(bw, "Idempotency-Key", r.IdempotencyKey)
	}
	// As net/http does: many servers want a length on these even when
	// there is no body.
	if len(r.Body) > 0 || r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(len(r.Body)))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	bw.Write(r.Body)
}

func header(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}
