// Package limits holds the rate and in-flight limits of destinations
// (store.Limits) in memory, for a process that owns its store (Local), and
// states the rules every holder of them follows, in memory, in PostgreSQL
// or in Redis. Package limitstest checks a holder against them.
//
// # Rate
//
// The generic cell rate algorithm, on the caller's clock (LimitParams.Now).
// A key keeps its theoretical arrival time, TAT, and a ticket, the last
// place in line given out. With the interval T = 1/PerSecond and the
// tolerance tau = (Burst-1)·T:
//
//	tat = max(stored TAT, now)
//	if tat - tau - now <= MaxWait:
//	    grant; Wait = max(0, tat - tau - now); stored TAT = tat + T
//	else:
//	    refuse (LimitRate); ticket = max(stored ticket, tat - tau, now) + T
//	    stored ticket = ticket; RetryAt = ticket
//
// So a quiet key grants Burst calls at once and then one per T, and the
// callers it refuses are told to come back one T apart, after the tokens
// already promised, rather than all at once.
//
// # In flight
//
// With MaxInFlight > 0 a grant also takes a slot, named by a fresh random
// Slot, which counts against the cap until LimitRelease frees it or until
// it expires, Hold after the grant's Now: a slot counts while Now is
// before its expiry. A holder that died cannot release its slots, and its
// slots end that way.
//
// # Both or neither
//
// A call is granted a token and a slot, or refused and given neither: a
// refusal for room in flight leaves the rate state as it was, and a refusal
// by the rate takes no slot. When both would refuse, the rate's refusal is
// the answer, since it carries a place in line.
//
// # Units
//
// Every holder computes in whole microseconds: Now rounded down, T and
// Hold rounded up (so the rate and the hold are never less than asked),
// MaxWait rounded down; see Plan.
package limits

import (
	"crypto/rand"
	"fmt"
	"math"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Idle is how long a holder keeps a key's state after the last moment it
// could matter (when its TAT, its ticket and its slots' expiries have all
// passed): the margin covers callers whose clocks, or whose Now values,
// are a little behind others'.
const Idle = time.Minute

// maxSpan bounds the durations of LimitParams, so that a time plus any of
// them, in microseconds, stays exact in a float64, as Redis's Lua keeps
// numbers.
const maxSpan = 100 * 365 * 24 * time.Hour

// Plan is a store.LimitParams checked and put in the whole microseconds
// every holder computes in (see the package documentation). Times are
// microseconds since the Unix epoch.
type Plan struct {
	Key string
	Now int64
	// Interval is T, the microseconds between rate tokens; 0 when there
	// is no rate limit. Tau is (Burst-1)·T.
	Interval, Tau int64
	MaxWait       int64
	MaxInFlight   int
	Hold          int64
	loc           *time.Location
}

// NewPlan checks p and returns its Plan. It is store.ErrInvalid when Key
// is empty, Now is zero, PerSecond is negative or not a number, MaxInFlight
// is negative, or MaxInFlight > 0 with no Hold, since a slot that expires
// at once caps nothing; and when the durations are absurd (beyond a
// century). A negative MaxWait means 0, a Burst below 1 means 1.
func NewPlan(p store.LimitParams) (Plan, error) {
	pl := Plan{Key: p.Key, Now: p.Now.UnixMicro(), MaxInFlight: p.MaxInFlight, loc: p.Now.Location()}
	switch {
	case p.Key == "":
		return Plan{}, fmt.Errorf("limit: no key: %w", store.ErrInvalid)
	case p.Now.IsZero():
		return Plan{}, fmt.Errorf("limit %s: no Now: %w", p.Key, store.ErrInvalid)
	case p.PerSecond < 0 || math.IsNaN(p.PerSecond) || math.IsInf(p.PerSecond, 0):
		return Plan{}, fmt.Errorf("limit %s: PerSecond %v: %w", p.Key, p.PerSecond, store.ErrInvalid)
	case p.MaxInFlight < 0:
		return Plan{}, fmt.Errorf("limit %s: MaxInFlight %d: %w", p.Key, p.MaxInFlight, store.ErrInvalid)
	case p.MaxInFlight > 0 && p.Hold <= 0:
		return Plan{}, fmt.Errorf("limit %s: MaxInFlight without a Hold: %w", p.Key, store.ErrInvalid)
	case p.Hold > maxSpan || p.MaxWait > maxSpan:
		return Plan{}, fmt.Errorf("limit %s: Hold or MaxWait beyond %v: %w", p.Key, maxSpan, store.ErrInvalid)
	}
	if p.PerSecond > 0 {
		ns := math.Round(float64(time.Second) / p.PerSecond) // to the nanosecond: 1/10 is 100ms, not a hair more
		burst := int64(max(p.Burst, 1))
		if ns > float64(maxSpan) || int64(ns) > int64(maxSpan)/burst {
			return Plan{}, fmt.Errorf("limit %s: PerSecond %v with Burst %d spans more than %v: %w",
				p.Key, p.PerSecond, p.Burst, maxSpan, store.ErrInvalid)
		}
		pl.Interval = ceilMicros(time.Duration(ns))
		pl.Tau = (burst - 1) * pl.Interval
	}
	pl.MaxWait = max(p.MaxWait, 0).Microseconds()
	if p.MaxInFlight > 0 {
		pl.Hold = ceilMicros(p.Hold)
	}
	return pl, nil
}

// ceilMicros is d in microseconds, rounded up, at least 1.
func ceilMicros(d time.Duration) int64 {
	return max((int64(d)+int64(time.Microsecond)-1)/int64(time.Microsecond), 1)
}

// NewSlot names the slot a grant of the plan takes: a fresh random name
// when the plan has a cap in flight, else "", since no slot is taken.
func (pl Plan) NewSlot() string {
	if pl.MaxInFlight <= 0 {
		return ""
	}
	return rand.Text()
}

// Granted is the grant of a token at the time at (µs) and of slot.
func (pl Plan) Granted(at int64, slot string) store.LimitGrant {
	return store.LimitGrant{OK: true, Wait: time.Duration(max(at-pl.Now, 0)) * time.Microsecond, Slot: slot}
}

// RefusedRate is the refusal by the rate with the place in line retryAt
// (µs).
func (pl Plan) RefusedRate(retryAt int64) store.LimitGrant {
	return store.LimitGrant{Reason: store.LimitRate, RetryAt: pl.Time(retryAt)}
}

// RefusedInFlight is the refusal for room in flight.
func (pl Plan) RefusedInFlight() store.LimitGrant {
	return store.LimitGrant{Reason: store.LimitInFlight}
}

// Time is the time us (µs since the Unix epoch) in the location of the
// plan's Now.
func (pl Plan) Time(us int64) time.Time {
	t := time.UnixMicro(us)
	if pl.loc != nil {
		t = t.In(pl.loc)
	}
	return t
}
