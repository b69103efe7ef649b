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
	"strings"
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
	raw    syscall.RawConn // for peek; nil when the connection has none
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

// earlyAnswerPoll is how long a write of a body may block before the
// writer looks for an answer the target sent without reading it all.
const earlyAnswerPoll = 50 * time.Millisecond

// send makes the attempt r to u, an http URL, filling in res. readBody
// consumes the response body.
func (h *h1) send(ctx context.Context, u *url.URL, r *Request, res *Result, readBody func(io.Reader) string) error {
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	c, reused, err := h.conn(ctx, addr, true)
	if err != nil {
		return err
	}
	err = h.roundTrip(ctx, c, u, r, res, readBody, reused && replayable(r))
	if !errors.Is(err, errStale) {
		return err
	}
	// The pooled connection was closed before it carried the request: it
	// is sent again once, on a new connection. The target may have
	// received the first copy (that cannot be told apart), which is why
	// only a request that says it is safe to repeat is resent; net/http
	// follows the same rule.
	if c, _, err = h.conn(ctx, addr, false); err != nil {
		return err
	}
	return h.roundTrip(ctx, c, u, r, res, readBody, false)
}

// replayable reports whether r may be sent twice: it carries an
// idempotency key, or its method is idempotent by definition.
func replayable(r *Request) bool {
	switch r.Method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	if r.IdempotencyKey != "" {
		return true
	}
	for k := range r.Headers {
		if strings.EqualFold(k, "Idempotency-Key") || strings.EqualFold(k, "X-Idempotency-Key") {
			return true
		}
	}
	return false
}

// conn returns an idle connection to addr (if pooled allows one), or a new
// one.
func (h *h1) conn(ctx context.Context, addr string, pooled bool) (c *h1Conn, reused bool, err error) {
	if pooled {
		if c := h.pool.get(addr); c != nil {
			return c, true, nil
		}
	}
	nc, err := h.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c = &h1Conn{c: nc, br: bufio.NewReaderSize(nc, 4<<10), bw: bufio.NewWriterSize(nc, 4<<10), addr: addr}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	return c, false, nil
}

// roundTrip sends r on c and reads the answer into res, then pools c or
// closes it. stale allows a failure before any answer to be reported as
// errStale: c was pooled, and r may be sent again.
func (h *h1) roundTrip(ctx context.Context, c *h1Conn, u *url.URL, r *Request, res *Result, readBody func(io.Reader) string, stale bool) (err error) {
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
			// Idle, it waits for no one: its next request sets its own
			// deadline, and peek must not find this one passed.
			_ = c.c.SetDeadline(time.Time{})
			h.pool.put(c)
			return
		}
		c.c.Close()
		if err != nil && (ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)) {
			err = contextErr(ctx)
		}
	}()

	complete, written := c.write(ctx, u, r)
	if _, err := c.br.Peek(1); err != nil {
		return staleIf(stale, cmp.Or(written, err))
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
	// Reused only if the request went out whole, the body was read to its
	// end and nothing follows it: anything else would be read as the next
	// request's response.
	keep = complete && hd.keepAlive && hd.body.done && c.br.Buffered() == 0
	return nil
}

// write sends r. complete is false when the request did not go out whole:
// err says why, unless the target answered early (see earlyAnswerPoll).
func (c *h1Conn) write(ctx context.Context, u *url.URL, r *Request) (complete bool, err error) {
	writeHead(c.bw, u, r)
	if len(r.Body) <= c.bw.Available() {
		c.bw.Write(r.Body)
		err := c.bw.Flush()
		return err == nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return false, err
	}
	deadline, _ := ctx.Deadline()
	for body := r.Body; len(body) > 0; {
		// Short write deadlines, so that a target that answers and stops
		// reading is heard.
		_ = c.c.SetWriteDeadline(earliest(deadline, time.Now().Add(earlyAnswerPoll)))
		n, err := c.c.Write(body)
		body = body[n:]
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline)):
			return false, err
		case peek(c) == peekData:
			final, err := c.interimOnly(deadline, r.Method)
			if err != nil || final {
				return false, err
			}
		}
	}
	_ = c.c.SetWriteDeadline(deadline)
	if ctx.Err() != nil { // the cancellation's deadline may have been overwritten
		return false, ctx.Err()
	}
	return true, nil
}

// interimOnly reads the informational responses (103 Early Hints, 100
// Continue) that have come while the body was being written, and reports
// whether a final answer is waiting after them: only that one stops the
// body. A head that has not fully come yet is looked at again later.
func (c *h1Conn) interimOnly(deadline time.Time, method string) (final bool, err error) {
	_ = c.c.SetReadDeadline(earliest(deadline, time.Now().Add(earlyAnswerPoll)))
	defer c.c.SetReadDeadline(deadline)
	budget := maxHeadBytes
	for {
		line, err := c.br.Peek(len("HTTP/1.1 100"))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return false, nil
		case err != nil:
			return false, err
		}
		status, perr := strconv.Atoi(string(line[len(line)-3:]))
		if perr != nil || !interim(status) {
			return true, nil // readHead says what it is
		}
		if _, err := readOne(c.br, method, &budget); err != nil {
			return false, err
		}
		if c.br.Buffered() == 0 && peek(c) != peekData {
			return false, nil
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// staleIf marks err as errStale, if stale allows, when it is how a reused
// connection that the target closed fails.
func staleIf(stale bool, err error) error {
	if stale && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
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

// writeHead writes the request line and the headers of r to bw;
// checkRequest has vetted them.
func writeHead(bw *bufio.Writer, u *url.URL, r *Request) {
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
}

func header(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}
