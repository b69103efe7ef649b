// Package hostlimit is retryd's admission of attempts per target host.
// Every attempt to a host passes that host's retry.Limiter (adaptive: its
// rate falls on the host's 429s, 503s, refused connections and timeouts,
// and rises as attempts succeed, with a circuit that stops all but a probe
// during an outage). An attempt the limiter holds back is not sent: its
// task goes back to PENDING, uncharged, due when the limiter expects room
// (store.Finish.Held). So a retry service, which sees every task bound for
// one target fail at once, holds them back together, where jitter alone
// would only spread their retries.
//
// Held tasks queue per host, each due again at the next slot of a schedule
// that follows the rate the limiter is expected to reach (see Host): so
// ten thousand tasks held by an outage come back about when the limiter
// has room for them, each about once, rather than all at the moment the
// limiter names, or again and again at random.
package hostlimit

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/internal/targeturl"
	"github.com/retrykit/retry/service/store"
)

// Tuning of admission; see the package documentation.
const (
	// MaxWait is the longest an admitted attempt waits for its slot in its
	// worker; a slot further ahead holds the task back instead.
	MaxWait = 100 * time.Millisecond
	// Overbook is how many held tasks come back for each slot the
	// limiter is expected to have: more than one, so that a rate growing
	// faster than expected finds tasks to send; the extra ones are held
	// again, at the end of the queue.
	Overbook = 1.5
	// MaxSpread bounds how far ahead of the limiter's answer a held task
	// is queued.
	MaxSpread = time.Minute
	// DefaultMaxHosts is how many limiters a Limits keeps when its max is 0.
	DefaultMaxHosts = retry.DefaultMaxLimiters
)

// HeldMessage is what a held task's lastError says, after the error of
// its last attempt.
const HeldMessage = "held: " + HeldReason

// HeldReason is why a task held by its host's limiter waits.
const HeldReason = "target overloaded"

// Limits hands out one Host per target host and Setting, made on first
// use: the policies that say nothing share a host's limiter, set up by
// Limits' own config; the policies with settings of their own share one per
// host and settings. It keeps at most its max; to make room it forgets one,
// chosen arbitrarily, whose host starts afresh if it comes back. A Limits
// is safe for concurrent use; Get allocates only to make a new Host.
type Limits struct {
	config retry.LimiterConfig
	max    int
	rand   backoff.Source

	optIn atomic.Bool // only the policies that ask have limiters (SetOptIn)

	mu    sync.Mutex
	m     map[hostKey]*Host
	share int // the processes sharing every host (SetShare); 1 alone
}

type hostKey struct{ host, spec string }

// New returns a Limits whose hosts' limiters, for the policies without
// settings of their own, are set up by c; it keeps at most max (0 means
// DefaultMaxHosts). rand spreads held tasks; nil means a source safe for
// concurrent use. It returns retry.NewLimiters' errors for c and max.
func New(c retry.LimiterConfig, max int, rand backoff.Source) (*Limits, error) {
	if _, err := retry.NewLimiters(c, max); err != nil {
		return nil, err
	}
	if max == 0 {
		max = DefaultMaxHosts
	}
	return &Limits{config: c, max: max, rand: backoff.Locked(rand), m: make(map[hostKey]*Host), share: 1}, nil
}

// SetShare says that n processes (retryd instances on one store), each
// with limiters of its own, send to the same hosts: each limiter then
// grows its rate by its increase divided by n (retry.Limiter.SetIncrease),
// so that together they grow no faster than one would and overshoot a
// host no more when they find its capacity. n below 1 means 1.
func (ls *Limits) SetShare(n int) {
	n = max(n, 1)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if n == ls.share {
		return
	}
	ls.share = n
	for _, h := range ls.m {
		h.setShare(n)
	}
}

// SetOptIn makes the limiters opt-in: only the policies whose Setting
// turns them on ({"enabled": true}, or settings of their own) have their
// tasks pass one; the others' are never held back.
func (ls *Limits) SetOptIn(on bool) { ls.optIn.Store(on) }

// On reports whether the attempts of a policy with setting s pass a
// limiter: not when s is off, nor when the limiters are opt-in and s does
// not turn them on.
func (ls *Limits) On(s Setting) bool { return !s.Off && (s.optedIn() || !ls.optIn.Load()) }

// Get returns the Host that admits the attempts of a policy with setting
// s to host (see Key), or nil when s is not On or host is empty.
func (ls *Limits) Get(host string, s Setting) *Host {
	if host == "" || !ls.On(s) {
		return nil
	}
	k := hostKey{host, s.spec}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if h, ok := ls.m[k]; ok {
		return h
	}
	if len(ls.m) >= ls.max {
		for k := range ls.m {
			delete(ls.m, k)
			break
		}
	}
	c := ls.config
	if s.Config != nil {
		c = *s.Config
	}
	lim, err := retry.NewLimiter(c)
	if err != nil { // a Setting's config was checked when it was decoded
		lim, _ = retry.NewLimiter(ls.config)
	}
	h := &Host{Name: host, lim: lim, rand: ls.rand, floor: c.Floor, ceiling: c.Ceiling, fullIncrease: c.Increase}
	if h.floor == 0 {
		h.floor = retry.DefaultLimiterFloor
	}
	if h.ceiling == 0 {
		h.ceiling = math.Inf(1)
	}
	if h.fullIncrease == 0 {
		h.fullIncrease = retry.DefaultLimiterIncrease
	}
	h.setShare(ls.share)
	ls.m[k] = h
	return h
}

// Host admits the attempts to one target host. It is safe for concurrent
// use.
type Host struct {
	Name string // the host, as Key gives it
	lim  *retry.Limiter
	rand backoff.Source
	// The limiter's settings, defaults applied, for the projection of its
	// rate (see hold); fullIncrease is before SetShare's division.
	floor, ceiling, fullIncrease float64

	mu       sync.Mutex
	cursor   time.Time // the next free slot of the queue of held tasks
	increase float64   // fullIncrease / the share
}

// setShare gives h's limiter its part of the increase, of n processes.
func (h *Host) setShare(n int) {
	inc := h.fullIncrease / float64(n)
	h.lim.SetIncrease(inc)
	h.mu.Lock()
	h.increase = inc
	h.mu.Unlock()
}

// Admit asks for an attempt at now. With a nil error the attempt may go
// after wait (at most MaxWait), and must be reported (Report) once
// answered. Otherwise (retry.ErrLimited, retry.ErrCircuitOpen) it must not
// go: its task is held back until until.
func (h *Host) Admit(now time.Time) (wait time.Duration, until time.Time, err error) {
	wait, err = h.lim.Reserve(now, MaxWait)
	if err == nil {
		return wait, time.Time{}, nil
	}
	return 0, h.hold(now, wait, errors.Is(err, retry.ErrCircuitOpen)), err
}

// hold returns when a task held back at now is due again; the limiter
// said to ask again after wait. Held tasks queue: each takes the next slot
// of a schedule that follows the rate the limiter is expected to reach
// (its additive increase from its current rate, or from its floor once an
// open circuit closes), Overbook times over, so that the tasks come back
// about when the limiter has room for them, each about once, instead of
// all at once after wait. A queue longer than MaxSpread is not kept in
// order: the task comes back at a uniform point of the next MaxSpread.
func (h *Host) hold(now time.Time, wait time.Duration, open bool) time.Time {
	base := now.Add(wait)
	rate, from := h.lim.Rate(), now
	if open || math.IsInf(rate, 1) {
		rate, from = h.floor, base // after the circuit closes, the rate starts from the floor
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cursor.Before(base) {
		h.cursor = base
	}
	if h.cursor.Sub(base) > MaxSpread {
		return base.Add(time.Duration(backoff.Uniform(h.rand) * float64(MaxSpread)))
	}
	due := h.cursor
	r := min(h.ceiling, max(h.floor, rate+h.increase*due.Sub(from).Seconds()))
	h.cursor = due.Add(time.Duration(float64(time.Second) / (r * Overbook)))
	return due
}

// Report tells the host's limiter how an admitted attempt ended at now:
// err nil for a success; see retry.Limiter.Report.
func (h *Host) Report(now time.Time, err error) { h.lim.Report(now, err) }

// Rate returns the limiter's rate, attempts per second (+Inf while it has
// limited nothing).
func (h *Host) Rate() float64 { return h.lim.Rate() }

// State returns the limiter's circuit state.
func (h *Host) State() retry.CircuitState { return h.lim.State() }

// Key returns the limiter key of a target URL: its scheme and authority
// (host, and port when the URL has one; package targeturl's rule), in
// lower case, without any userinfo; "" when rawURL has no "scheme://". It
// allocates nothing for a URL in lower case without userinfo, the common
// case.
func Key(rawURL string) string {
	u, ok := targeturl.Cut(rawURL)
	if !ok {
		return ""
	}
	return strings.ToLower(u.Origin())
}

// HeldError returns the lastError of a task held back, whose lastError was
// last: HeldMessage after the error of its last attempt, said once however
// often the task is held.
func HeldError(last string) string {
	return store.HeldError(last, HeldReason)
}
