// Package limitstest is the conformance suite of store.Limits: every
// holder of destination limits (limits.Local, the PostgreSQL and Redis
// stores) runs Run, and the rules of package limits are pinned here.
//
//	func TestLimits(t *testing.T) {
//		limitstest.Run(t, func(t *testing.T) store.Limits { return newEmptyHolder(t) })
//	}
//
// The subtests run in parallel, each on a holder of its own, so newLimits
// must be safe to call concurrently. A holder that several processes share
// also runs RunShared, with two values on the same data. Every call names
// its Now: nothing here reads the clock, so the answers are exact.
package limitstest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// NewLimits makes an empty holder of limits for one subtest.
type NewLimits func(t *testing.T) store.Limits

// NewShared makes two values holding the same, empty, limits: two
// processes sharing a store.
type NewShared func(t *testing.T) (store.Limits, store.Limits)

// Run runs the conformance tests against holders made by newLimits.
func Run(t *testing.T, newLimits NewLimits) {
	one := func(t *testing.T) (store.Limits, store.Limits) {
		l := newLimits(t)
		return l, l
	}
	tests := []struct {
		name string
		run  func(*testing.T, store.Limits)
	}{
		{"BurstThenPace", testBurstThenPace},
		{"Wait", testWait},
		{"Line", testLine},
		{"RoundedRate", testRoundedRate},
		{"InFlight", testInFlight},
		{"InFlightExpiry", testInFlightExpiry},
		{"BothOrNeither", testBothOrNeither},
		{"KeysApart", testKeysApart},
		{"NoLimit", testNoLimit},
		{"Invalid", testInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newLimits(t))
		})
	}
	t.Run("ConcurrentInFlight", func(t *testing.T) {
		t.Parallel()
		testConcurrentInFlight(t, one)
	})
	t.Run("ConcurrentRate", func(t *testing.T) {
		t.Parallel()
		testConcurrentRate(t, one)
	})
}

// RunShared runs the tests of limits held for several processes, each on
// two values made by newShared that share their data.
func RunShared(t *testing.T, newShared NewShared) {
	t.Run("Shared", func(t *testing.T) {
		t.Parallel()
		testShared(t, newShared)
	})
	t.Run("ConcurrentInFlight", func(t *testing.T) {
		t.Parallel()
		testConcurrentInFlight(t, newShared)
	})
	t.Run("ConcurrentRate", func(t *testing.T) {
		t.Parallel()
		testConcurrentRate(t, newShared)
	})
}

// start is the time the tests start from: whole seconds, far from the
// servers' clocks, which nothing may read.
func start() time.Time { return time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC) }

// caller makes calls on one key with the same limits, at times from start.
type caller struct {
	t *testing.T
	l store.Limits
	p store.LimitParams
}

func newCaller(t *testing.T, l store.Limits, p store.LimitParams) caller {
	return caller{t: t, l: l, p: p}
}

// at calls LimitAcquire at start+d, failing t on an error.
func (c caller) at(d time.Duration) store.LimitGrant {
	c.t.Helper()
	p := c.p
	p.Now = start().Add(d)
	g, err := c.l.LimitAcquire(context.Background(), p)
	if err != nil {
		c.t.Fatalf("LimitAcquire(%s at +%v) = %v", p.Key, d, err)
	}
	return g
}

// release calls LimitRelease, failing t on an error.
func (c caller) release(slot string) {
	c.t.Helper()
	if err := c.l.LimitRelease(context.Background(), c.p.Key, slot); err != nil {
		c.t.Fatalf("LimitRelease(%s, %s) = %v", c.p.Key, slot, err)
	}
}

// grant checks that g grants with wait and a slot when the caller has a
// cap in flight (and none otherwise), and returns the slot.
func (c caller) grant(g store.LimitGrant, wait time.Duration, what string) string {
	c.t.Helper()
	ok := g.OK && g.Wait == wait && g.Reason == "" && g.RetryAt.IsZero() && (g.Slot != "") == (c.p.MaxInFlight > 0)
	if !ok {
		c.t.Errorf("%s: got %s, want granted with Wait %v", what, show(g), wait)
	}
	return g.Slot
}

// refusedRate checks that g is a refusal by the rate with the place in
// line start+retryAt.
func (c caller) refusedRate(g store.LimitGrant, retryAt time.Duration, what string) {
	c.t.Helper()
	if g.OK || g.Reason != store.LimitRate || !g.RetryAt.Equal(start().Add(retryAt)) || g.Slot != "" || g.Wait != 0 {
		c.t.Errorf("%s: got %s, want refused by the rate, RetryAt +%v", what, show(g), retryAt)
	}
}

// refusedInFlight checks that g is a refusal for room in flight.
func (c caller) refusedInFlight(g store.LimitGrant, what string) {
	c.t.Helper()
	if g.OK || g.Reason != store.LimitInFlight || !g.RetryAt.IsZero() || g.Slot != "" || g.Wait != 0 {
		c.t.Errorf("%s: got %s, want refused in flight", what, show(g))
	}
}

// show prints g with its RetryAt from start.
func show(g store.LimitGrant) string {
	at := "zero"
	if !g.RetryAt.IsZero() {
		at = "+" + g.RetryAt.Sub(start()).String()
	}
	return fmt.Sprintf("{OK %t Wait %v Slot %q Reason %q RetryAt %s}", g.OK, g.Wait, g.Slot, g.Reason, at)
}

func testNoLimit(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/free"})
	for range 5 {
		c.grant(c.at(0), 0, "a call without limits")
	}
	// A release of a slot never taken, of a key never seen, is no error.
	c.release("no-such-slot")
	c.release("")
}

func testInvalid(t *testing.T, l store.Limits) {
	ok := store.LimitParams{Key: "t/bad", Now: start(), PerSecond: 1, MaxInFlight: 1, Hold: time.Second}
	for name, edit := range map[string]func(*store.LimitParams){
		"no key":               func(p *store.LimitParams) { p.Key = "" },
		"no Now":               func(p *store.LimitParams) { p.Now = time.Time{} },
		"negative PerSecond":   func(p *store.LimitParams) { p.PerSecond = -1 },
		"NaN PerSecond":        func(p *store.LimitParams) { p.PerSecond = zero() / zero() },
		"negative MaxInFlight": func(p *store.LimitParams) { p.MaxInFlight = -1 },
		"cap without Hold":     func(p *store.LimitParams) { p.Hold = 0 },
	} {
		p := ok
		edit(&p)
		if g, err := l.LimitAcquire(context.Background(), p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("LimitAcquire(%s) = %s, %v; want ErrInvalid", name, show(g), err)
		}
	}
	if _, err := l.LimitAcquire(context.Background(), ok); err != nil {
		t.Errorf("LimitAcquire(valid) = %v", err)
	}
}

// zero is 0 where the compiler cannot see it, to make a NaN.
func zero() float64 { return 0 }
