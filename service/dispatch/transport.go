package dispatch

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// What fasthttp does for an attempt, and what this file adds.
//
// fasthttp writes the request head, parses the response (interim
// responses, framing, chunks, trailers) and keeps a pool of connections per
// target host, dropping those idle for idleTimeout and the hosts left
// without any. This file is its Transport, which fasthttp calls to make one
// exchange on one of those connections, and adds what an attempt needs and
// fasthttp has no notion of:
//
//   - a context: its cancellation interrupts the TLS handshake and every
//     read and write at once, by moving the connection's deadline into the
//     past (fasthttp knows only timeouts);
//   - reads capped for a hostile target: the head at maxHeadBytes, the body
//     kept up to KeepBytes and drained up to MaxResponseBytes so that the
//     connection can carry the next attempt, or else dropped (fasthttp
//     would buffer a whole body, or fail on one over its limit, losing the
//     status);
//   - a pooled connection looked at before it is used (peek): one the
//     target closed while it was idle is replaced, not failed on, and one
//     the target spoke on (a 408 before hanging up, bytes past the last
//     response) is dropped rather than its bytes taken for the answer, as
//     net/http's reader goroutine does;
//   - a request failed on a pooled connection the target had closed is
//     sent again once, and only if it may be (replayable), as net/http does;
//   - an answer the target sends before it has read a large body (a 413)
//     is the attempt's result, not the write's error: such a body is
//     written while the answer is read;
//   - a bound on what an attempt reads from its connection in all
//     (readBudget), for what fasthttp leaves unbounded (the extensions of
//     a chunk, up to 100 interim responses);
//   - a bound on idle connections in all, beside the one per host;
//   - a body by reference, streamed from the blob store as it is read
//     (body.go): fasthttp never sees it (no SetBodyStream); it is written
//     here after the head, as an inline body is.

// call is one attempt on its way through fasthttp, pooled: the request and
// the response, and what the transport needs beside them.
type call struct {
	req  fasthttp.Request
	resp fasthttp.Response

	d          *Dispatcher
	ctx        context.Context
	deadline   time.Time
	body       []byte
	replayable bool
	res        *Result
	scratch    []byte

	// A body by reference (body.go): its reference, the reader of this
	// try and its size, whether any of it was read, and the context it is
	// read under (the attempt's, up to its deadline), cancelled at its end.
	ref      string
	blob     io.ReadCloser
	size     int64
	blobRead bool
	// hasLength: the head has a Content-Length.
	hasLength bool
	bodyCtx   context.Context
	bodyStop  context.CancelFunc
	// own is the connection of the try under way.
	own *conn
}

// callKey is the user value of a call's request that points to the call.
type callKey struct{}

// do sends r to u through fasthttp and fills in res; checkRequest has
// vetted r.
func (d *Dispatcher) do(ctx context.Context, deadline time.Time, u *url.URL, r *Request, res *Result) error {
	c := d.calls.Get().(*call)
	defer d.release(c)
	c.d, c.ctx, c.deadline, c.body, c.res = d, ctx, deadline, r.Body, res
	c.size = int64(len(r.Body))
	if r.BodyRef != "" {
		// Opened before a connection is taken: a blob that cannot be read
		// costs the target nothing.
		c.ref = r.BodyRef
		c.bodyCtx, c.bodyStop = context.WithDeadline(ctx, deadline)
		if err := c.openBody(); err != nil {
			return c.fail(err)
		}
	}
	var signed []Header
	if r.Sign != nil {
		var err error
		if signed, err = d.sign(ctx, r); err != nil {
			return c.fail(err)
		}
	}
	c.replayable = replayable(r)
	c.build(u, r, signed)
	return d.client.Do(&c.req, &c.resp)
}

func (d *Dispatcher) release(c *call) {
	c.req.Reset() // the response is reset by fasthttp before each use
	c.closeBody()
	if c.bodyStop != nil {
		c.bodyStop()
	}
	c.ctx, c.body, c.res, c.bodyCtx, c.bodyStop, c.own = nil, nil, nil, nil, nil, nil
	c.ref, c.size, c.blobRead = "", 0, false
	d.calls.Put(c)
}

// build sets c's request to r, to be sent to u. Where fasthttp would add
// or change a header, it is told not to: the head is the request line and
// these fields, in this order. checkRequest has made sure that the host
// names are ASCII.
func (c *call) build(u *url.URL, r *Request, signed []Header) {
	req := &c.req
	req.SetUserValue(callKey{}, c)
	h := &req.Header
	h.DisableSpecialHeader() // no Content-Type, Cookie, Host or length of fasthttp's own
	h.DisableNormalizing()   // the names below are canonical already
	h.SetMethod(r.Method)
	// fasthttp picks the host's client from the URI, which is set field by
	// field rather than parsed: the URL's userinfo is not sent, and a Host
	// header does not choose where to connect.
	uri := req.URI()
	uri.SetScheme(u.Scheme)
	uri.SetHost(u.Host)
	// The request target as net/http writes it (URL.RequestURI).
	b := c.scratch[:0]
	switch {
	case u.Opaque != "":
		b = append(b, u.RequestURI()...)
	default:
		b = append(b, u.EscapedPath()...)
		if len(b) == 0 {
			b = append(b, '/')
		}
		if u.ForceQuery || u.RawQuery != "" {
			b = append(b, '?')
			b = append(b, u.RawQuery...)
		}
	}
	h.SetRequestURIBytes(b)
	host := u.Host
	if o, ok := hostOverride(r.Headers); ok {
		host = o
	}
	h.Add("Host", host)
	agent := false
	traced := r.Trace.Valid()
	for k, v := range r.Headers {
		k = textproto.CanonicalMIMEHeaderKey(k)
		switch {
		case managed(k), k == "Idempotency-Key" && r.IdempotencyKey != "", k == "Traceparent" && traced,
			attemptHeader(r, k), overridden(k, r.Extra), overridden(k, signed):
			continue
		case k == "User-Agent":
			agent = true
		}
		h.Add(k, v)
	}
	for _, x := range r.Extra {
		if attemptHeader(r, x.Name) {
			continue
		}
		agent = agent || x.Name == "User-Agent"
		h.Add(x.Name, x.Value)
	}
	for _, x := range signed {
		h.Add(x.Name, x.Value)
	}
	if !agent {
		h.Add("User-Agent", defaultUserAgent)
	}
	if r.IdempotencyKey != "" {
		h.Add("Idempotency-Key", r.IdempotencyKey)
	}
	if r.TaskID != "" {
		h.Add(HeaderTaskID, r.TaskID)
		// Formatted in scratch, which the head copies: no allocation.
		b = strconv.AppendInt(b[:0], int64(r.Attempt), 10)
		h.AddBytesV(HeaderAttempt, b)
		b = strconv.AppendInt(b[:0], r.FirstAttemptAt.UnixMilli(), 10)
		h.AddBytesV(HeaderFirstAttemptAt, b)
	}
	if traced {
		// Formatted in scratch, which the head copies: no allocation.
		b = r.Trace.appendTraceparent(b[:0])
		h.SetBytesV("Traceparent", b)
	}
	// As net/http does: many servers want a length on these even when
	// there is no body, and none on the others without one.
	c.hasLength = c.size > 0 || r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH"
	if c.hasLength {
		c.setLength(b)
		b = c.scratch
	}
	c.scratch = b
}

// setLength sets the Content-Length to c.size, in scratch.
func (c *call) setLength(scratch []byte) {
	c.scratch = strconv.AppendInt(scratch[:0], c.size, 10)
	c.req.Header.SetBytesV("Content-Length", c.scratch)
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

// transport is the fasthttp.RoundTripper of a Dispatcher's client.
type transport struct{ d *Dispatcher }

// errStale marks a pooled connection the target closed before it carried
// the request: fasthttp sends it again, once (MaxIdemponentCallAttempts),
// on the next connection it has, which peek has looked at. The target may
// have received the first copy (that cannot be told apart), which is why
// only a replayable request is sent again; net/http has the same rule.
var errStale = errors.New("idle connection closed by the target")

// errMalformed marks a response that does not parse as HTTP/1.x. It is a
// network-level failure of the attempt, retried like a dropped connection.
var errMalformed = errors.New("malformed HTTP response")

// aLongTimeAgo is a deadline that interrupts a blocked read or write.
var aLongTimeAgo = time.Unix(1, 0)

// concurrentBody is the length past which a request body is written by a
// goroutine of its own while the answer is read: a longer one may not fit
// in the socket's buffer, and a target that answers early and stops
// reading would leave a write blocked until the deadline.
const concurrentBody = 8 << 10

// RoundTrip makes the attempt whose call req belongs to on a connection
// of hc, filling in the call's Result. retry asks fasthttp to call again
// (errStale).
func (t transport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	c, ok := req.UserValue(callKey{}).(*call)
	if !ok {
		return false, errors.New("dispatch: a request that is not an attempt")
	}
	return c.roundTrip(hc, resp)
}

func (c *call) roundTrip(hc *fasthttp.HostClient, resp *fasthttp.Response) (retry bool, err error) {
	d := c.d
	timeout := time.Until(c.deadline)
	if timeout <= 0 || c.ctx.Err() != nil {
		return false, c.fail(context.DeadlineExceeded)
	}
	if c.ref != "" && c.blobRead {
		// Sent again (errStale): the body is read afresh, and its length
		// is what this Open gives. The first try may have cancelled the
		// context of its reader (finish).
		if c.bodyCtx.Err() != nil && c.ctx.Err() == nil {
			c.bodyStop()
			c.bodyCtx, c.bodyStop = context.WithDeadline(c.ctx, c.deadline)
		}
		if err := c.openBody(); err != nil {
			return false, c.fail(err)
		}
		if c.hasLength = c.hasLength || c.size > 0; c.hasLength {
			c.setLength(c.scratch)
		}
	}
	// A pooled connection is used only if peek finds it fit to carry a
	// request. It is unfit when the target sent something while it was
	// idle: it closed it, or it answered nothing that was asked (a 408
	// before hanging up, bytes past the end of the last response), which
	// the next request would take for its answer.
	cc, err := hc.AcquireConn(timeout, false)
	var own *conn
	for err == nil {
		if own = ours(cc.Conn()); own == nil {
			hc.CloseConn(cc)
			return false, errors.New("dispatch: a connection the Dispatcher did not dial")
		}
		if !own.taken() || own.peek() == peekNothing {
			break
		}
		hc.CloseConn(cc)
		cc, err = hc.AcquireConn(timeout, false)
	}
	if err != nil {
		return false, c.fail(err)
	}
	reused := own.wasIdle
	own.left = d.readBudget
	c.own = own
	nc := cc.Conn()
	keep := false
	stop := func() bool { return true }
	defer func() {
		// Idle, it waits for no one: its next request sets its own
		// deadline, and peek must not find this one passed.
		if !stop() || !keep || nc.SetDeadline(time.Time{}) != nil || !d.pool(hc, own) {
			hc.CloseConn(cc)
			return
		}
		hc.ReleaseConn(cc)
		if d.closed.Load() { // Close ran meanwhile
			hc.CloseIdleConnections()
		}
	}()

	// The deadline bounds every read and write; a cancellation moves it
	// into the past. A new TLS connection has its handshake first, bounded
	// by ConnectTimeout too.
	tc, isTLS := nc.(*tls.Conn)
	handshake := isTLS && !reused
	first := c.deadline
	if handshake {
		first = earliest(c.deadline, time.Now().Add(d.cfg.ConnectTimeout))
	}
	if err := nc.SetDeadline(first); err != nil {
		return false, err
	}
	if c.ctx.Done() != nil {
		stop = context.AfterFunc(c.ctx, own.interrupt)
	}
	if handshake {
		if err := tc.Handshake(); err != nil {
			return false, c.fail(err)
		}
		// After the cancellation's deadline, if it came meanwhile, it must
		// still hold.
		if err := nc.SetDeadline(c.deadline); err != nil || c.ctx.Err() != nil {
			return false, c.fail(cmp.Or(err, c.ctx.Err()))
		}
	}

	bw := hc.AcquireWriter(nc)
	var (
		werr    error
		written chan error // of a body written concurrently
		// cut: finish cut the write short, and werr is what that did to
		// it, not why the attempt failed.
		cut bool
	)
	if c.size <= concurrentBody {
		werr = c.write(bw)
		if isBodyError(werr) {
			// Half sent: the target waits for the rest, which will not
			// come. The connection is closed (keep is false).
			hc.ReleaseWriter(bw)
			bw = nil
			return false, c.fail(werr)
		}
	} else {
		written = make(chan error, 1)
		go c.writeTo(bw, written)
	}
	// finish waits for a concurrent write, cutting it short if it is still
	// going (the answer came first, or the read failed), and reports
	// whether the request went out whole.
	finish := func() bool {
		if written != nil {
			select {
			case werr = <-written:
			default:
				_ = nc.SetWriteDeadline(aLongTimeAgo)
				if c.bodyStop != nil {
					c.bodyStop() // a body's reader may be what it waits on
				}
				werr = <-written // nil if it ended meanwhile
				// A body's own failure (corrupt, say) stays the cause.
				cut = werr != nil && (!isBodyError(werr) || errors.Is(werr, context.Canceled))
			}
			written = nil
		}
		hc.ReleaseWriter(bw)
		bw = nil
		return werr == nil
	}
	defer func() {
		if bw != nil {
			finish()
		}
	}()

	br := hc.AcquireReader(nc)
	defer hc.ReleaseReader(br)
	// cause is why the attempt failed when reading the answer did with
	// err: the write's error, if it failed of itself.
	cause := func(err error) error {
		if cut {
			return err
		}
		return cmp.Or(werr, err)
	}
	if _, err := br.Peek(1); err != nil {
		finish()
		err = cause(err)
		switch {
		case isBodyError(err):
			return false, c.fail(err)
		case !closedBeforeAnswer(err):
		case reused && c.replayable:
			return true, fmt.Errorf("%w: %w", errStale, err)
		default:
			err = fmt.Errorf("connection closed before an answer came: %w", err)
		}
		return false, c.fail(err)
	}
	resp.StreamBody = true // the body is read below, within bounds
	resp.SkipBody = c.req.Header.IsHead()
	if err := resp.ReadLimitBody(br, 0); err != nil {
		finish()
		return false, c.fail(cause(err))
	}
	defer resp.CloseBodyStream()
	status := resp.StatusCode()
	if status < 100 { // no status at all (Result.Status 0 means none)
		finish()
		return false, fmt.Errorf("%w: status %d", errMalformed, status)
	}
	res := c.res
	res.Status = status
	if v := resp.Header.Peek("Retry-After"); len(v) > 0 {
		res.RetryAfter, res.HasRetryAfter = parseRetryAfter(string(v), res.Start)
	}
	res.NoRetry = parseNoRetry(resp.Header.Peek(HeaderRetry))
	if status >= 300 && status < 400 {
		// Send bounds it; no more of it than that needs is copied.
		loc := resp.Header.Peek("Location")
		res.Location = string(loc[:min(len(loc), 4*MaxQuotedBytes+1)])
	}
	complete := true
	if body := resp.BodyStream(); body != nil {
		complete = d.readBody(body, res)
	}
	// Reused only if the request went out whole, the body was read to its
	// end and nothing follows it: anything else would be read as the next
	// request's response. A 101 switched the connection to another
	// protocol.
	keep = finish() && complete && !resp.ConnectionClose() && status != 101 && br.Buffered() == 0
	return false, nil
}

// writeTo writes the request and sends how that went to done. When a
// body's reader fails, the answer being read is interrupted: the target
// waits for the rest of the body, and will not answer.
func (c *call) writeTo(bw *bufio.Writer, done chan<- error) {
	err := c.write(bw)
	if isBodyError(err) {
		c.own.interrupt()
	}
	done <- err
}

// write sends the request head and body.
func (c *call) write(bw *bufio.Writer) error {
	if err := c.req.Header.Write(bw); err != nil {
		return err
	}
	if c.ref != "" {
		return c.writeBody(bw)
	}
	if _, err := bw.Write(c.body); err != nil {
		return err
	}
	return bw.Flush()
}

// fail returns the error of an attempt that failed with err: the context's
// when it was cancelled or its deadline has passed.
func (c *call) fail(err error) error {
	if cerr := c.ctx.Err(); cerr != nil {
		return cerr
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return err
}

// closedBeforeAnswer reports whether err is how a connection the target
// closed fails before any byte of an answer.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// dial connects to addr for fasthttp, within timeout and ConnectTimeout;
// the dialer's Control runs the guard on each address tried.
func (d *Dispatcher) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > d.cfg.ConnectTimeout {
		timeout = d.cfg.ConnectTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nc, err := d.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, d: d}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.peeker = &peeker{raw: raw}
			c.peeker.try = c.peeker.recv
		}
	}
	// Made once, rather than for each attempt that may cancel.
	c.interrupt = func() { _ = nc.SetDeadline(aLongTimeAgo) }
	return c, nil
}

// conn is a connection as dialled (under TLS, for an https target). It
// knows whether it waits in a pool, so that the Dispatcher can count the
// idle ones however they end (fasthttp closes those idle too long).
type conn struct {
	net.Conn
	*peeker // nil when the connection has no file descriptor
	d       *Dispatcher
	// interrupt cuts short the reads and writes under way: its
	// attempt's context was cancelled.
	interrupt func()
	// left is what the attempt using the connection may still read.
	left int64
	// idle is set while the connection is in a pool; wasIdle, by taken,
	// when it came from one.
	idle    atomic.Bool
	wasIdle bool
}

// ours returns the conn under nc, if nc is one of the Dispatcher's.
func ours(nc net.Conn) *conn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, _ := nc.(*conn)
	return c
}

// pool reports whether c, a connection of hc, may go back to its pool, and
// counts it among the idle connections if so: unless Close has been
// called, or there are MaxIdlePerHost idle connections to its host (a
// bound others sending at once may pass by a few) or maxIdle in all.
func (d *Dispatcher) pool(hc *fasthttp.HostClient, c *conn) bool {
	if d.closed.Load() {
		return false
	}
	// A host cannot have more idle connections than there are in all: its
	// pool's lock is taken only when it might.
	if d.idle.Load() >= int64(d.cfg.MaxIdlePerHost) && hc.IdleConnsCount() >= d.cfg.MaxIdlePerHost {
		return false
	}
	if d.idle.Add(1) > d.maxIdle {
		d.idle.Add(-1)
		return false
	}
	c.idle.Store(true)
	return true
}

// taken takes c out of the idle connections, as it leaves a pool, and
// reports whether it was in one: a connection used before.
func (c *conn) taken() bool {
	c.wasIdle = c.idle.Swap(false)
	if c.wasIdle {
		c.d.idle.Add(-1)
	}
	return c.wasIdle
}

// errReadTooMuch ends an attempt that has read Dispatcher.readBudget bytes
// from its connection.
var errReadTooMuch = errors.New("the response runs past what an attempt reads")

// Read reads from the connection within what its attempt may still read.
func (c *conn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errReadTooMuch
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *conn) Close() error {
	if c.idle.Swap(false) {
		c.d.idle.Add(-1)
	}
	return c.Conn.Close()
}
