package limitstest

import (
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// testInFlight: a cap in flight counts the slots taken and not released;
// a release is idempotent and frees only its own slot.
func testInFlight(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/cap", MaxInFlight: 2, Hold: 10 * time.Second})
	s1 := c.grant(c.at(0), 0, "the first call")
	s2 := c.grant(c.at(0), 0, "the second call")
	if s1 == s2 {
		t.Fatalf("two grants took the same slot %q", s1)
	}
	c.refusedInFlight(c.at(0), "the third call")
	c.release(s1)
	s3 := c.grant(c.at(time.Second), 0, "a call after a release")
	c.release(s1) // again: no error, and frees nothing
	c.release("no-such-slot")
	other := newCaller(t, l, store.LimitParams{Key: "t/other", MaxInFlight: 1, Hold: time.Second})
	other.release(s2) // the slot's name under another key frees nothing
	c.refusedInFlight(c.at(time.Second), "a call after releases of other slots")
	c.release(s2)
	c.release(s3)
	c.grant(c.at(time.Second), 0, "a call after both slots were released")
	c.grant(c.at(time.Second), 0, "another")
	c.refusedInFlight(c.at(time.Second), "a third")
}

// testInFlightExpiry: a slot never released counts until Hold after the
// grant's Now, and no longer from then on.
func testInFlightExpiry(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/expiry", MaxInFlight: 2, Hold: 10 * time.Second})
	c.grant(c.at(0), 0, "the call at 0")
	s2 := c.grant(c.at(time.Second), 0, "the call at +1s")
	c.refusedInFlight(c.at(10*time.Second-time.Microsecond), "a call just before the first slot expires")
	s3 := c.grant(c.at(10*time.Second), 0, "a call as the first slot expires")
	c.refusedInFlight(c.at(10*time.Second), "another call then")
	c.grant(c.at(11*time.Second), 0, "a call as the second slot expires")
	c.release(s2) // expired: no error
	c.refusedInFlight(c.at(11*time.Second), "a call with two slots live")
	c.release(s3)
	c.grant(c.at(11*time.Second), 0, "a call after a release")
}

// testBothOrNeither: a call refused in flight takes no rate token, a call
// refused by the rate takes no slot, and when both would refuse the rate
// answers, with a place in line.
func testBothOrNeither(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/both", PerSecond: 10, Burst: 1, MaxInFlight: 1,
		Hold: time.Minute})
	s1 := c.grant(c.at(0), 0, "the first call")
	for range 3 {
		c.refusedInFlight(c.at(100*ms), "a call while the slot is held, a token free")
	}
	c.release(s1)
	s2 := c.grant(c.at(100*ms), 0, "the call after the release, on the token the refused left")
	c.refusedRate(c.at(100*ms), 300*ms, "a call with neither room nor token")
	c.release(s2)
	c.refusedRate(c.at(150*ms), 400*ms, "a call with room, no token")
	c.grant(c.at(200*ms), 0, "a call at the next token, in the room the refused left")
	c.refusedInFlight(c.at(300*ms), "a call at the next token, the slot held")
}

// testKeysApart: keys share nothing.
func testKeysApart(t *testing.T, l store.Limits) {
	p := store.LimitParams{PerSecond: 1, Burst: 1, MaxInFlight: 1, Hold: time.Minute}
	p.Key = "t/a"
	a := newCaller(t, l, p)
	p.Key = "t/b"
	b := newCaller(t, l, p)
	sa := a.grant(a.at(0), 0, "key a's call")
	a.refusedRate(a.at(0), 2*time.Second, "key a's second call")
	sb := b.grant(b.at(0), 0, "key b's call, beside a's")
	b.release(sa)
	a.refusedInFlight(a.at(time.Second), "key a's call after key b released a's slot name")
	a.release(sb)
	b.refusedInFlight(b.at(time.Second), "key b's call after key a released b's slot name")
}
