package limitstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

const ms = time.Millisecond

// testBurstThenPace: a quiet key grants Burst calls at once, then one per
// interval; after a quiet spell, a burst again.
func testBurstThenPace(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/pace", PerSecond: 10, Burst: 3})
	for i := range 3 {
		c.grant(c.at(0), 0, fmt.Sprintf("call %d of the burst", i+1))
	}
	// TAT is +300ms; the next token is free at TAT - tau = +100ms, and
	// the refused are lined up one interval after it, and after each
	// other.
	c.refusedRate(c.at(0), 200*ms, "the call after the burst")
	c.refusedRate(c.at(0), 300*ms, "the second call after the burst")
	for k := 1; k <= 9; k++ {
		now := time.Duration(k) * 100 * ms
		c.grant(c.at(now), 0, fmt.Sprintf("the call at +%v", now))
		c.refusedRate(c.at(now), now+300*ms, fmt.Sprintf("the second call at +%v", now))
	}
	// Half an interval brings no token.
	c.refusedRate(c.at(950*ms), 1300*ms, "the call half an interval on")
	// After a quiet spell the key bursts again, and lines the refused up
	// from the tokens it has now, not from the old line.
	for i := range 3 {
		c.grant(c.at(10*time.Second), 0, fmt.Sprintf("call %d of the second burst", i+1))
	}
	c.refusedRate(c.at(10*time.Second), 10*time.Second+200*ms, "the call after the second burst")
}

// testWait: a token up to MaxWait ahead is granted with its Wait.
func testWait(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/wait", PerSecond: 10, Burst: 1, MaxWait: 200 * ms})
	c.grant(c.at(0), 0, "the first call")
	c.grant(c.at(0), 100*ms, "the second call")
	c.grant(c.at(0), 200*ms, "the third call, MaxWait ahead")
	c.refusedRate(c.at(0), 400*ms, "the fourth call, beyond MaxWait")
	c.grant(c.at(150*ms), 150*ms, "a call later, its wait shorter")
	// A caller back at its place in line finds its token.
	c.grant(c.at(400*ms), 0, "the refused call, back at its place")
	c.grant(c.at(450*ms), 50*ms, "a call between places")
}

// testLine: the refused are given places one interval apart, each after
// the last, and come back paced at the rate.
func testLine(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/line", PerSecond: 4, Burst: 2})
	c.grant(c.at(0), 0, "call 1")
	c.grant(c.at(0), 0, "call 2")
	var line []time.Time
	for i := range 6 {
		g := c.at(time.Duration(i) * ms)
		c.refusedRate(g, 250*ms*time.Duration(i+2), fmt.Sprintf("refused call %d", i+1))
		line = append(line, g.RetryAt)
	}
	// Each comes back at its place and is granted at once.
	for i, at := range line {
		c.grant(c.at(at.Sub(start())), 0, fmt.Sprintf("refused call %d back at its place", i+1))
	}
}

// testRoundedRate: an interval that is not a whole number of microseconds
// is rounded up, so the rate is never exceeded, and every holder rounds
// alike.
func testRoundedRate(t *testing.T, l store.Limits) {
	c := newCaller(t, l, store.LimitParams{Key: "t/third", PerSecond: 3, MaxWait: time.Second})
	c.grant(c.at(0), 0, "the first call")
	c.grant(c.at(0), 333334*time.Microsecond, "the second call")
	c.grant(c.at(0), 666668*time.Microsecond, "the third call")
	c.refusedRate(c.at(0), 1333336*time.Microsecond, "the fourth call")
	// Now is taken to the microsecond, rounded down.
	c.grant(c.at(1000*ms+999), 2*time.Microsecond, "a call at a fraction of a microsecond")
}
