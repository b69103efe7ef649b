package retry

import (
	"context"
	"errors"
	"math"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/retrykit/retry/backoff"
)

// The reasons an execution stops when its Limiter holds it back for longer
// than it may wait (see Policy.Limiter).
var (
	// ErrLimited: the limiter's rate would let the next attempt go only
	// after the budget or the caller's deadline.
	ErrLimited = errors.New("held back by the limiter")
	// ErrCircuitOpen: the limiter's circuit is open (its dependency has
	// answered nothing but overload for a while) and would let no probe go
	// before the budget or the caller's deadline.
	ErrCircuitOpen = errors.New("limiter circuit open")
)

// Defaults of LimiterConfig.
const (
	DefaultLimiterFloor        = 1.0  // attempts/s
	DefaultLimiterIncrease     = 10.0 // attempts/s gained per second of successes
	DefaultLimiterDecrease     = 0.8  // the rate is multiplied by this on overload
	DefaultLimiterBurst        = 1.0  // attempts
	DefaultLimiterQueue        = 100 * time.Millisecond
	DefaultLimiterCircuitAfter = 2 * time.Second
	DefaultLimiterOpenFor      = 5 * time.Second
	DefaultLimiterOutageShare  = 0.75
)

// circuitMinOverloads is the least number of overloads in a row that opens
// the circuit, however long they took, and of outage signals in the last
// second or two that lower the rate: two unlucky answers are not an
// outage.
const circuitMinOverloads = 3

// LimiterConfig sets up a Limiter. Zero fields take the defaults, field by
// field; rates are attempts per second.
type LimiterConfig struct {
	// Floor is the lowest rate the limiter falls to; 0 means
	// DefaultLimiterFloor.
	Floor float64
	// Ceiling is the highest rate, and the rate at the start. 0 means none:
	// the limiter lets everything through until the first overload, then
	// limits, and its rate may grow without bound as calls succeed.
	Ceiling float64
	// Increase is how fast the rate grows while attempts succeed: it gains
	// Increase attempts/s for every second of successes at the full rate
	// (Increase/rate per success: the additive increase of AIMD). 0 means
	// DefaultLimiterIncrease. Set it to about a tenth of what the
	// dependency can take per second: the rate then overshoots by at most
	// that much before the first overload signal brings it down.
	Increase float64
	// Decrease multiplies the rate (or the rate measured over the last
	// second, when lower) on an overload signal, at most once per Queue; it
	// is in (0, 1) and 0 means DefaultLimiterDecrease.
	Decrease float64
	// Burst is how many attempts may go at once after a quiet spell; 0
	// means DefaultLimiterBurst.
	Burst float64
	// Queue is how far ahead the limiter hands out slots: an attempt that
	// would have to wait longer than this (or than one interval at the
	// current rate, when longer) is not queued but told to ask again later.
	// Slots handed out are not taken back when the rate falls, so Queue
	// bounds what an overload signal cannot stop. 0 means
	// DefaultLimiterQueue.
	Queue time.Duration
	// CircuitAfter opens the circuit when every attempt answered for this
	// long (and at least three in a row) was an overload: then no attempt
	// goes for OpenFor, after which one probe goes; its success closes the
	// circuit (and the rate starts again from Floor), its overload opens it
	// again. 0 means DefaultLimiterCircuitAfter; a negative value means no
	// circuit.
	CircuitAfter time.Duration
	// OpenFor is how long the circuit stays open before a probe, on
	// average: each time it opens, for a time drawn uniformly from [OpenFor/2,
	// 3·OpenFor/2), so that the circuits of many clients, opened by one
	// outage, do not all probe at once. 0 means DefaultLimiterOpenFor.
	OpenFor time.Duration
	// Rand supplies the draws of the open times; nil means a source safe
	// for concurrent use that needs no seeding. A seeded source must be
	// safe for concurrent use too (see backoff.Locked).
	Rand backoff.Source
	// Overload tells an overload signal from other failures; nil means
	// IsOverload. A failure that is not an overload (a 500, a 404) neither
	// lowers nor raises the rate, but ends a run of overloads.
	Overload func(error) bool
	// OutageShare is the share of the answers of the last second or two
	// that overload signals other than throttles must reach before they
	// lower the rate. A throttle — a 429, a gRPC RESOURCE_EXHAUSTED, any
	// error with a Retry-After or pushback hint — is the dependency asking
	// to slow down, and lowers the rate at once. The other signals (a 503
	// without a hint, a refused or reset connection, a timeout) come as
	// well from a dependency that is up but fails some calls for reasons of
	// their own — an endpoint answering 503 to each first try — whose rate
	// a limiter must not pin to its floor: they count as an outage only
	// while they are most answers. In (0, 1]; 0 means
	// DefaultLimiterOutageShare.
	OutageShare float64
}

// CircuitState is the state of a Limiter's circuit.
type CircuitState int

// The circuit states.
const (
	CircuitClosed   CircuitState = iota // attempts go at the limiter's rate
	CircuitOpen                         // no attempt goes
	CircuitHalfOpen                     // one probe may go, or is out
)

// String returns "closed", "open" or "half-open".
func (s CircuitState) String() string {
	switch s {
	case CircuitClosed:
		return "closed"
	case CircuitOpen:
		return "open"
	case CircuitHalfOpen:
		return "half-open"
	}
	return "CircuitState(" + strconv.Itoa(int(s)) + ")"
}

// Limiter is an adaptive rate limiter shared by the attempts to one
// dependency (a host, a gRPC target), against retry storms: jitter spreads
// each client's retries, but only a limiter that all of them share can keep
// their sum within what the dependency can take.
//
// It is a token bucket whose rate follows AIMD: each overload signal (see
// IsOverload) cuts it by Decrease — a signal other than a throttle only
// while such signals are most answers (see LimiterConfig.OutageShare) —,
// each success raises it by Increase/rate, between Floor and Ceiling. After a sustained overload its circuit opens:
// nothing goes but a probe every OpenFor, until one succeeds.
//
// It decides when an attempt may go; the Policy still decides whether. Put
// it in Policy.Limiter and Do waits for it before every attempt, the first
// included, and reports every outcome to it; executors of their own (a
// durable service) call Reserve and Report. All times handed to one Limiter
// must come from one clock. A Limiter is safe for concurrent use, and
// Reserve and Report allocate nothing.
type Limiter struct {
	// The configuration, with defaults set; never changed.
	floor, ceiling, decrease, burst float64
	outageShare                     float64
	queue, circuitAfter, openFor    time.Duration
	overload                        func(error) bool
	rand                            backoff.Source

	mu       sync.Mutex
	increase float64 // the configuration's, or SetIncrease's
	rate     float64 // +Inf: no limit yet
	tokens   float64 // below 0: slots handed out for the future
	last     time.Time

	// The attempts let through, the answers reported and the outage
	// signals among them, counted in one-second bins, for the rate and the
	// outage share measured over the last second or two.
	binStart               time.Time
	sent, prevSent         float64
	answered, prevAnswered float64
	outages, prevOutages   float64
	lastDecrease           time.Time
	overloads              int // in a row
	overloadsSince         time.Time
	state                  CircuitState
	openUntil              time.Time // CircuitOpen: no attempt before
	probeOut               bool      // CircuitHalfOpen: a probe went and has not answered
	probeLostAfter         time.Time // when a probe that never answered is given up
}

// NewLimiter returns a Limiter set up by c, or an error (a *FieldError per
// bad field, joined) if c has a negative or non-finite number, a Ceiling
// below the Floor, or a Decrease of 1 or more.
func NewLimiter(c LimiterConfig) (*Limiter, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	d := c.withDefaults()
	l := &Limiter{
		floor: d.Floor, ceiling: d.Ceiling, increase: d.Increase, decrease: d.Decrease, burst: d.Burst,
		queue: d.Queue, circuitAfter: d.CircuitAfter, openFor: d.OpenFor, overload: d.Overload, rand: d.Rand,
		outageShare: d.OutageShare,
	}
	if l.overload == nil {
		l.overload = IsOverload
	}
	l.rate = math.Inf(1)
	if l.ceiling > 0 {
		l.rate = l.ceiling
	} else {
		l.ceiling = math.Inf(1)
	}
	l.tokens = l.burst
	return l, nil
}

func (c *LimiterConfig) validate() error {
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: field, Reason: reason}) }
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"floor", c.Floor}, {"ceiling", c.Ceiling}, {"increase", c.Increase}, {"burst", c.Burst}} {
		if !(f.v >= 0 && f.v <= 1e12) {
			bad(f.name, "must be a number from 0 to 1e12")
		}
	}
	floor := c.Floor
	if floor == 0 {
		floor = DefaultLimiterFloor
	}
	if c.Ceiling > 0 && c.Ceiling < floor {
		bad("ceiling", "must not be below the floor")
	}
	if !(c.Decrease >= 0 && c.Decrease < 1) {
		bad("decrease", "must be at least 0 and below 1")
	}
	if !(c.OutageShare >= 0 && c.OutageShare <= 1) {
		bad("outageShare", "must be a number from 0 to 1")
	}
	if c.Queue < 0 {
		bad("queue", "must not be negative")
	}
	if c.OpenFor < 0 {
		bad("openFor", "must not be negative")
	}
	return errors.Join(errs...)
}

// Reserve asks for one attempt at now. With a nil error the attempt may go
// after wait (0: at once) and the slot is taken: do not ask again for it.
// With ErrLimited or ErrCircuitOpen nothing is taken, and wait is when to
// ask again; so it is too when a slot exists but only after maxWait (what
// the caller can still wait: its budget, its deadline; a negative maxWait
// means no limit).
func (l *Limiter) Reserve(now time.Time, maxWait time.Duration) (wait time.Duration, err error) {
	if maxWait < 0 {
		maxWait = math.MaxInt64
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case CircuitOpen:
		if now.Before(l.openUntil) {
			return l.openUntil.Sub(now), ErrCircuitOpen
		}
		l.state = CircuitHalfOpen
		fallthrough
	case CircuitHalfOpen:
		if l.probeOut && now.Before(l.probeLostAfter) {
			// The probe's answer may close the circuit any moment: ask
			// again soon, not when the probe would be given up.
			return min(l.probeLostAfter.Sub(now), l.queue), ErrCircuitOpen
		}
		l.probeOut, l.probeLostAfter = true, now.Add(l.openFor)
		l.count(now)
		return 0, nil
	}
	if math.IsInf(l.rate, 1) {
		l.count(now)
		return 0, nil
	}
	l.refill(now)
	if l.tokens >= 1 {
		l.tokens--
		l.count(now)
		return 0, nil
	}
	wait = seconds((1 - l.tokens) / l.rate)
	if horizon := max(l.queue, seconds(1/l.rate)); wait > horizon {
		// Not queued: a slot this far ahead could not be taken back if the
		// rate fell meanwhile. Come back when the slots handed out are
		// used up (not when the first has room, which would have every
		// waiter ask again at each slot).
		return wait, ErrLimited
	}
	if wait > maxWait {
		return wait, ErrLimited
	}
	l.tokens--
	l.count(now)
	return wait, nil
}

// Report tells the limiter how an attempt it let go ended, at now: err nil
// for a success. An overload signal (see LimiterConfig.Overload) lowers the
// rate and may open the circuit; a success raises the rate and closes a
// half-open circuit; another failure only ends a run of overloads (and
// closes a half-open circuit: the dependency answered). An executor does
// not report an attempt that its own caller cut short.
func (l *Limiter) Report(now time.Time, err error) {
	overload := err != nil && l.overload(err)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case CircuitOpen:
		return // a late answer of an attempt sent before the circuit opened
	case CircuitHalfOpen:
		if !l.probeOut {
			return
		}
		l.probeOut = false
		if overload {
			l.open(now)
			return
		}
		// The dependency answers again: start over from the floor, for all
		// its callers are about to come back at once.
		l.state = CircuitClosed
		l.rate, l.tokens, l.last = l.floor, min(l.tokens, 1), now
		l.overloads = 0
		return
	}
	l.roll(now)
	l.answered++
	if !overload {
		l.overloads = 0
		if err == nil && !math.IsInf(l.rate, 1) {
			l.refill(now)
			l.rate = min(l.ceiling, l.rate+l.increase/l.rate)
		}
		return
	}
	if l.overloads == 0 {
		l.overloadsSince = now
	}
	l.overloads++
	acts := true
	if !throttled(err) {
		l.outages++
		n := l.prevOutages + l.outages
		acts = n >= circuitMinOverloads && n >= l.outageShare*(l.prevAnswered+l.answered)
	}
	if acts && (l.lastDecrease.IsZero() || now.Sub(l.lastDecrease) >= l.queue) {
		l.refill(now)
		l.rate = max(l.floor, l.decrease*min(l.rate, l.measured(now)))
		l.tokens = min(l.tokens, l.burst)
		l.lastDecrease = now
	}
	if l.circuitAfter > 0 && l.overloads >= circuitMinOverloads && now.Sub(l.overloadsSince) >= l.circuitAfter {
		l.open(now)
	}
}

// open opens the circuit at now.
func (l *Limiter) open(now time.Time) {
	l.state = CircuitOpen
	l.openUntil = now.Add(time.Duration((0.5 + backoff.Uniform(l.rand)) * float64(l.openFor)))
	l.overloads = 0
}

// refill adds the tokens earned since the last refill, up to Burst.
func (l *Limiter) refill(now time.Time) {
	if dt := now.Sub(l.last); dt > 0 {
		if !math.IsInf(l.rate, 1) {
			l.tokens = min(l.burst, l.tokens+l.rate*dt.Seconds())
		}
		l.last = now
	} else if l.last.IsZero() {
		l.last = now
	}
}

// count records an attempt let through at now, in one-second bins.
func (l *Limiter) count(now time.Time) {
	l.roll(now)
	l.sent++
}

func (l *Limiter) roll(now time.Time) {
	switch d := now.Sub(l.binStart); {
	case l.binStart.IsZero():
		l.binStart = now
	case d >= 2*time.Second:
		l.binStart, l.prevSent, l.sent = now, 0, 0
		l.prevAnswered, l.answered, l.prevOutages, l.outages = 0, 0, 0, 0
	case d >= time.Second:
		l.binStart, l.prevSent, l.sent = l.binStart.Add(time.Second), l.sent, 0
		l.prevAnswered, l.answered, l.prevOutages, l.outages = l.answered, 0, l.outages, 0
	}
}

// measured returns the attempts let through per second, over the last one
// to two seconds.
func (l *Limiter) measured(now time.Time) float64 {
	l.roll(now)
	span := now.Sub(l.binStart).Seconds() + 1
	return (l.prevSent + l.sent) / span
}

// SetIncrease changes the limiter's additive increase (see
// LimiterConfig.Increase) from now on; 0 means DefaultLimiterIncrease, and
// a negative, non-finite or over 1e12 value is ignored. Several processes
// that call one dependency, each with a limiter of its own, give each its
// part of the increase the dependency can take: their rates grow together
// no faster than one limiter's would.
func (l *Limiter) SetIncrease(increase float64) {
	if !(increase >= 0 && increase <= 1e12) {
		return
	}
	if increase == 0 {
		increase = DefaultLimiterIncrease
	}
	l.mu.Lock()
	l.increase = increase
	l.mu.Unlock()
}

// Rate returns the current rate in attempts per second: +Inf while the
// limiter has yet to limit anything.
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// State returns the circuit's state as of the last call to Reserve or
// Report: an open circuit whose OpenFor has passed still reads open until
// someone asks.
func (l *Limiter) State() CircuitState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// IsOverload reports whether err says the dependency is overloaded or out
// of reach, the signals a Limiter slows down for: an HTTP 429 or 503 (an
// error with HTTPStatusCode() int), a gRPC UNAVAILABLE, RESOURCE_EXHAUSTED
// or DEADLINE_EXCEEDED (an error with RPCStatusCode() string, as
// retrygrpc's are), a refused or reset connection, or a timeout. The
// caller's own cancellation is not one, and Do does not report an attempt
// its caller's context ended.
func IsOverload(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if f := inspect(err); f.hasStatus {
		return f.status == 429 || f.status == 503
	}
	// The RPC code is read here, not by inspect: nothing else needs it, and
	// every retry runs inspect.
	var rc interface{ RPCStatusCode() string }
	if errors.As(err, &rc) {
		switch rc.RPCStatusCode() {
		case "UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED":
			return true
		}
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// throttled reports whether an overload signal is the dependency asking to
// slow down (see LimiterConfig.OutageShare): a 429, a gRPC
// RESOURCE_EXHAUSTED, or a Retry-After or pushback hint.
func throttled(err error) bool {
	f := inspect(err)
	if f.hasHint && f.hint >= 0 {
		return true
	}
	if f.hasStatus {
		return f.status == 429
	}
	var rc interface{ RPCStatusCode() string }
	return errors.As(err, &rc) && rc.RPCStatusCode() == "RESOURCE_EXHAUSTED"
}

// admit waits until p.Limiter lets the next attempt go, within the budget
// and the caller's deadline; it returns the error that ends the execution
// when it cannot. lastErr is the previous attempt's error, if any.
func (r *run) admit(ctx context.Context, p *Policy, lastErr error) error {
	clk := clock(p)
	for {
		now := clk.Now()
		maxWait := time.Duration(-1)
		if p.Budget > 0 {
			maxWait = max(0, p.Budget-now.Sub(r.start))
		}
		if dl, ok := ctx.Deadline(); ok {
			if left := max(0, time.Until(dl)); maxWait < 0 || left < maxWait {
				maxWait = left
			}
		}
		wait, err := p.Limiter.Reserve(now, maxWait)
		if err != nil && maxWait >= 0 && wait > maxWait {
			return r.stop(ctx, p, err, lastErr, now, r.attempt > 0 && r.timed)
		}
		if wait > 0 && clk.Sleep(ctx, wait) != nil {
			return r.stop(ctx, p, ErrCancelled, lastErr, now, r.attempt > 0 && r.timed)
		}
		if err == nil {
			r.admitted = now.Add(wait)
			if r.timed {
				r.callStart = r.admitted
			}
			return nil
		}
	}
}

// report hands an attempt's outcome to p.Limiter, unless the caller's
// context ended it: that says nothing of the dependency. A success is
// reported at the attempt's start, which the limiter needs no more
// precisely, and spares reading the clock: that is a third of what a
// limited success costs.
func (r *run) report(ctx context.Context, p *Policy, err error) {
	switch {
	case err == nil:
		p.Limiter.Report(r.admitted, nil)
	case ctx.Err() == nil:
		p.Limiter.Report(clock(p).Now(), err)
	}
}

// DefaultMaxLimiters is how many limiters a Limiters keeps when its max is
// 0.
const DefaultMaxLimiters = 1024

// Limiters hands out one Limiter per key — a host, a gRPC target — each
// set up by one LimiterConfig, made on first use. It keeps at most its max;
// to make room it forgets one limiter, chosen arbitrarily, whose key starts
// afresh if it comes back. retryhttp.Transport and retrygrpc.Config take one
// to limit each host or target on its own. A Limiters is safe for
// concurrent use; Get allocates only to make a new limiter.
type Limiters struct {
	config LimiterConfig
	max    int
	mu     sync.Mutex
	m      map[string]*Limiter
}

// NewLimiters returns a Limiters that sets up each Limiter with c and keeps
// at most max of them (0 means DefaultMaxLimiters), or NewLimiter's error
// for c, or an error for a negative max.
func NewLimiters(c LimiterConfig, max int) (*Limiters, error) {
	if _, err := NewLimiter(c); err != nil {
		return nil, err
	}
	if max < 0 {
		return nil, &FieldError{Field: "max", Reason: "must not be negative"}
	}
	if max == 0 {
		max = DefaultMaxLimiters
	}
	return &Limiters{config: c, max: max, m: make(map[string]*Limiter)}, nil
}

// Get returns key's Limiter, made now if there is none.
func (ls *Limiters) Get(key string) *Limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.m[key]; ok {
		return l
	}
	if len(ls.m) >= ls.max {
		for k := range ls.m {
			delete(ls.m, k)
			break
		}
	}
	l, _ := NewLimiter(ls.config) // checked by NewLimiters
	ls.m[key] = l
	return l
}

// Len returns how many limiters ls holds.
func (ls *Limiters) Len() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.m)
}
