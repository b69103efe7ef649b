package gate

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"strconv"
	"time"

	"github.com/retrykit/retry/service/destination/signing"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// Call is one admitted attempt to a destination: Acquire its room, build
// its Request, send it through Dispatcher, then report it with Done.
type Call struct {
	g          *Gate
	e          *entry
	v          *view
	tenant, id string
	// URL is where the attempt goes: the destination's URL and the task's
	// path.
	URL      string
	slot     string
	acquired bool
	tokenGen uint64 // the OAuth2 token the request carries
}

// Destination returns the ID of the call's destination.
func (c *Call) Destination() string { return c.id }

// Dispatcher returns the dispatcher that sends the call: the destination's
// own when it has TLS settings or a longer timeout.
func (c *Call) Dispatcher() *dispatch.Dispatcher { return c.v.disp }

// Timeout returns the destination's timeout for one attempt, 0 when it
// sets none.
func (c *Call) Timeout() time.Duration { return c.v.timeout }

// Acquire takes the call's room under the destination's rate and
// in-flight limits, waiting in the worker for a rate token due within
// MaxWait. Without room it returns the Hold to hand the task back with;
// once it returned nil the caller must call Done.
func (c *Call) Acquire(ctx context.Context) *Hold {
	d := c.v.d
	if d.RateLimit == nil && d.MaxInFlight == 0 {
		c.acquired = true
		return nil
	}
	p := store.LimitParams{
		Key: c.tenant + "/" + c.id, Now: c.g.cfg.Now(), MaxWait: c.g.cfg.MaxWait,
		MaxInFlight: d.MaxInFlight, Hold: c.g.cfg.Hold,
	}
	if r := d.RateLimit; r != nil {
		p.PerSecond, p.Burst = r.PerSecond, r.BurstOrDefault()
	}
	grant, err := c.g.cfg.Limits.LimitAcquire(ctx, p)
	if err != nil {
		c.g.cfg.Logger.Warn("gate: limits unreadable; the attempt waits", "destination", c.id, "error", err)
		return c.g.hold(c.tenant, c.id, p.Now.Add(time.Second), HeldUnavailable)
	}
	if !grant.OK {
		until := grant.RetryAt
		if grant.Reason == store.LimitInFlight || until.IsZero() {
			// Room frees as attempts end: look again after about one
			// attempt's time, spread so the held do not come back together.
			mean := min(max(c.v.meanDuration(), 10*time.Millisecond), 5*time.Second)
			until = p.Now.Add(mean + rand.N(mean+1))
		}
		return c.g.hold(c.tenant, c.id, until, grant.Reason)
	}
	c.slot, c.acquired = grant.Slot, true
	if d.MaxInFlight > 0 && c.g.cfg.Recorder != nil {
		c.g.cfg.Recorder.DestinationInFlight(c.tenant, c.id, 1)
	}
	// The token's time is the store's answer for p.Now: the round trip
	// to the store is already spent of its wait.
	answered, due := c.g.cfg.Now(), p.Now.Add(grant.Wait)
	if wait := due.Sub(answered); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if d.RateLimit != nil {
		// A token spent late crowds the tokens after it into less than
		// their second: one whose time passed by more than maxLate while
		// this worker waited for it (a busy machine) is given up, and the
		// task looks again at once. A store slow to answer delays every
		// token alike, which crowds nothing: it does not count.
		if now := c.g.cfg.Now(); now.Sub(maxTime(due, answered)) > maxLate {
			c.Release(ctx)
			return c.g.hold(c.tenant, c.id, now, HeldRate)
		}
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxLate is how long after its time a rate token may still be used: at
// 100/s, five requests more than the rate in any second.
const maxLate = 50 * time.Millisecond

// Request returns the dispatch request of the task's attempt: the task's
// request sent to URL, with the destination's headers and credentials over
// the task's, and its signature; without the headers that tell the target
// the task and attempt (r.TaskID cleared) when the destination switched
// them off. An error (an OAuth2 token endpoint that fails) is the
// attempt's error: nothing was sent.
func (c *Call) Request(ctx context.Context, t *store.Task, r dispatch.Request) (dispatch.Request, error) {
	r.URL = c.URL
	r.Extra = c.v.extra
	if !c.v.d.SendsAttemptHeaders() {
		r.TaskID, r.Attempt, r.FirstAttemptAt = "", 0, time.Time{}
	}
	if tc := c.v.token; tc != nil {
		tok, gen, err := tc.get(ctx, c.g.cfg.Now())
		if err != nil {
			return r, err
		}
		c.tokenGen = gen
		r.Extra = append(r.Extra[:len(r.Extra):len(r.Extra)], dispatch.Header{Name: "Authorization", Value: "Bearer " + tok})
	}
	if len(c.v.keys) > 0 {
		keys := c.v.signingKeys(c.g.cfg.Now())
		id := t.IdempotencyKey
		r.Sign = func(body io.Reader) ([]dispatch.Header, error) {
			now := c.g.cfg.Now()
			sig, err := signing.Sign(keys, id, now, body)
			if err != nil {
				return nil, err
			}
			return []dispatch.Header{
				{Name: "Webhook-Id", Value: id},
				{Name: "Webhook-Timestamp", Value: strconv.FormatInt(now.Unix(), 10)},
				{Name: "Webhook-Signature", Value: sig},
			}, nil
		}
	}
	return r, nil
}

// Done reports the call's result (ok: a success under the task's policy)
// and frees its room. again asks to send the task again at once,
// uncharged: the target refused an OAuth2 token with a 401, the token is
// dropped, and the next attempt fetches a fresh one. A fresh token refused
// again is the attempt's failure.
func (c *Call) Done(ctx context.Context, res *dispatch.Result, ok bool) (again bool) {
	c.Release(ctx)
	if res.Duration > 0 {
		c.v.observe(res.Duration)
	}
	if tc := c.v.token; tc != nil && c.tokenGen != 0 {
		if res.Status == http.StatusUnauthorized {
			if tc.refused(c.tokenGen) {
				c.g.hold(c.tenant, c.id, time.Time{}, HeldToken)
				return true
			}
		} else if res.Status > 0 {
			tc.accepted(c.tokenGen)
		}
	}
	c.g.track(ctx, c, ok)
	return false
}

// Release frees the room Acquire took, if any, without a result: what a
// caller does that did not send the call after all. Done releases it too.
func (c *Call) Release(ctx context.Context) {
	if !c.acquired {
		return
	}
	c.acquired = false
	if c.slot != "" {
		if err := c.g.cfg.Limits.LimitRelease(context.WithoutCancel(ctx), c.tenant+"/"+c.id, c.slot); err != nil {
			c.g.cfg.Logger.Warn("gate: in-flight slot not released; it expires", "destination", c.id, "error", err)
		}
	}
	if c.v.d.MaxInFlight > 0 && c.g.cfg.Recorder != nil {
		c.g.cfg.Recorder.DestinationInFlight(c.tenant, c.id, -1)
	}
}

func canonical(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }
