package retryhttp

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/retrykit/retry"
)

// call is one RoundTrip: the state of its attempts, never shared.
type call struct {
	t    *Transport
	req  *http.Request
	base http.RoundTripper
	p    retry.Policy // t's policy with defaults, this call's hooks and logger
	n    int          // attempts made
	url  string       // req.URL redacted; "" until needed
	// resp is the last attempt's response while it may still be returned;
	// cancel releases its attempt context (nil without AttemptTimeout).
	resp   *http.Response
	cancel context.CancelCauseFunc
}

// once sends a request that must not be retried.
func (c *call) once() (*http.Response, error) {
	resp, cancel, err := c.send(c.req.Context(), c.req)
	if err != nil {
		return nil, err
	}
	c.resp, c.cancel = resp, cancel
	return c.deliver(), nil
}

// run sends the request under the retry engine.
func (c *call) run() (*http.Response, error) {
	c.p = c.t.policy()
	if c.p.Limiter == nil && c.t.Limiters != nil {
		c.p.Limiter = c.t.Limiters.Get(c.req.URL.Host)
	}
	if c.p.Logger != nil {
		c.p.Logger = logger(c.p.Logger, c.method(), c.redacted())
	}
	user := c.p.Observer
	// Retrying is heard only once the engine has decided to wait and retry,
	// so the response can be let go here, and its connection is free during
	// the wait.
	c.p.Observer = retry.ObserverFunc(func(ctx context.Context, e retry.Event) {
		switch {
		case e.Outcome == retry.Retrying:
			c.discard()
		case e.Outcome == retry.Succeeded && c.resp != nil:
			e.Result = responseStatus(c.resp.StatusCode)
		}
		if user != nil {
			user.Observe(ctx, e)
		}
	})
	err := retry.Do(c.req.Context(), c.p, c.attempt)
	if c.resp != nil {
		return c.deliver(), nil
	}
	return nil, err
}

// attempt makes one attempt and reports its outcome to the engine. The
// request keeps the caller's context: ctx, the engine's, ends when the engine
// returns, and the caller reads the body after that; ctx's deadline (the
// budget's, the policy's AttemptTimeout) bounds the wait for the headers.
func (c *call) attempt(ctx context.Context) error {
	c.n++
	r := c.req
	if c.n > 1 && r.Body != nil && r.Body != http.NoBody {
		body, err := r.GetBody()
		if err != nil {
			return retry.Permanent(c.transportError(fmt.Errorf("retryhttp: rewind request body: %w", err)))
		}
		r = r.Clone(r.Context())
		r.Body = body
	}
	resp, cancel, err := c.send(ctx, r)
	if err != nil {
		return c.transportError(err)
	}
	c.resp, c.cancel = resp, cancel
	if !c.p.RetryableStatus(resp.StatusCode) {
		return nil
	}
	e := &StatusError{Method: c.method(), URL: c.redacted(), StatusCode: resp.StatusCode, Status: resp.Status, retryAfter: -1}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if d, ok := ParseRetryAfter(v, c.now()); ok {
			e.retryAfter = d
		}
	}
	return e
}

// send makes one attempt through Base, within AttemptTimeout and limit's
// deadline, if any. With a timeout, it returns the cancel func of the
// attempt's context, which must live as long as the response body: it is
// called when the body is discarded or closed.
func (c *call) send(limit context.Context, r *http.Request) (*http.Response, context.CancelCauseFunc, error) {
	d := c.t.AttemptTimeout
	if dl, ok := limit.Deadline(); ok && limit != r.Context() {
		if left := time.Until(dl); d <= 0 || left < d {
			d = max(left, time.Nanosecond)
		}
	}
	if d <= 0 {
		resp, err := c.base.RoundTrip(r)
		return resp, nil, err
	}
	// A deadline on the attempt's context would also cut off the reading of
	// a successful body after RoundTrip returns; a timer stopped once the
	// headers are in bounds the wait for them only.
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	resp, err := c.base.RoundTrip(r.WithContext(ctx))
	if !timer.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, nil, fmt.Errorf("retryhttp: no response within the attempt timeout of %v: %w", d, context.DeadlineExceeded)
	}
	if err != nil {
		cancel(nil)
		return nil, nil, err
	}
	return resp, cancel, nil
}

// discard drains (bounded) and closes the response the engine gave up on,
// so that its connection goes back to the pool.
func (c *call) discard() {
	if c.resp == nil {
		return
	}
	if n := c.t.maxDrain(); n > 0 {
		if n < math.MaxInt64 {
			n++ // one more byte to see the end of a body of exactly n bytes
		}
		_, _ = io.CopyN(io.Discard, c.resp.Body, n)
	}
	c.resp.Body.Close()
	if c.cancel != nil {
		c.cancel(nil)
	}
	c.resp, c.cancel = nil, nil
}

// deliver hands the kept response to the caller, tying its attempt context
// (if any) to its body.
func (c *call) deliver() *http.Response {
	resp, cancel := c.resp, c.cancel
	c.resp, c.cancel = nil, nil
	switch {
	case cancel == nil:
	case resp.Body == nil:
		cancel(nil)
	default:
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			// A 101 Switching Protocols body is the connection itself.
			resp.Body = &cancelRWBody{rwc, cancel}
		} else {
			resp.Body = &cancelBody{resp.Body, cancel}
		}
	}
	return resp
}

func (c *call) transportError(err error) *TransportError {
	return &TransportError{Method: c.method(), URL: c.redacted(), Err: err}
}

func (c *call) now() time.Time {
	if c.p.Clock != nil {
		return c.p.Clock.Now()
	}
	return time.Now()
}

func (c *call) method() string {
	if c.req.Method == "" {
		return http.MethodGet
	}
	return c.req.Method
}

func (c *call) redacted() string {
	if c.url == "" {
		c.url = c.req.URL.Redacted()
	}
	return c.url
}

// cancelBody releases the attempt's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// cancelRWBody is cancelBody for a body that can also be written to.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}

// responseStatus is an Event.Result: the status of the response a
// successful attempt got, named as a StatusError names a failed one's.
type responseStatus int

// HTTPStatusCode returns the status code.
func (s responseStatus) HTTPStatusCode() int { return int(s) }
