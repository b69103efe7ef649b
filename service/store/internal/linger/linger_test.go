package linger

import (
	"testing"
	"time"
)

// TestWaitsForTheCallersThereAre: the writer waits for as many operations
// as recent commits held, not for Ops whatever the callers: 4 callers that
// each wait for their answer get a wait for 4.
func TestWaitsForTheCallersThereAre(t *testing.T) {
	busy := func(g *Gather) { g.end, g.took = time.Now(), time.Hour } // the last commit just ended

	var g Gather
	busy(&g)
	if wait, _ := g.Wait(1, Max); wait != 0 {
		t.Errorf("no commit yet: Wait = %v, want none", wait)
	}

	g.Committed(time.Now(), 4, false, false)
	busy(&g)
	wait, want := g.Wait(1, Max)
	if wait != Max || want != 4 {
		t.Errorf("after a commit of 4: Wait = %v for %d, want %v for 4", wait, want, Max)
	}
	if wait, _ := g.Wait(4, Max); wait != 0 {
		t.Errorf("4 already queued: Wait = %v, want none", wait)
	}
	if wait, _ := g.Wait(1, time.Microsecond); wait != time.Microsecond {
		t.Errorf("limit 1µs: Wait = %v, want 1µs", wait)
	}

	// A wait that ran out lowers what the next waits for, one at a time,
	// down to no wait at all: a caller writing alone never waits.
	g.Committed(time.Now(), 3, true, true)
	busy(&g)
	if _, want := g.Wait(1, Max); want != 3 {
		t.Errorf("after a short wait: waits for %d, want 3", want)
	}
	g.Committed(time.Now(), 2, true, true)
	g.Committed(time.Now(), 1, true, true)
	busy(&g)
	if wait, _ := g.Wait(1, Max); wait != 0 {
		t.Errorf("after waits in vain down to one caller: Wait = %v, want none", wait)
	}

	// A larger commit raises the peak, and one that got what it waited
	// for keeps it; the writer waits for Ops at most.
	g.Committed(time.Now(), 20, false, false)
	g.Committed(time.Now(), 10, true, false)
	busy(&g)
	if _, want := g.Wait(1, Max); want != Ops {
		t.Errorf("after commits of 20 and 10: waits for %d, want %d", want, Ops)
	}

	// A smaller commit taken without waiting came to an idle writer: the
	// callers are fewer now (one at a time here), and nothing waits.
	g.Committed(time.Now(), 1, false, false)
	busy(&g)
	if wait, _ := g.Wait(1, Max); wait != 0 {
		t.Errorf("after a lone operation to an idle writer: Wait = %v, want none", wait)
	}

	// An idle writer (its last commit ended longer ago than it took)
	// never waits, and none waits longer than the last commit took.
	g.Committed(time.Now(), 6, false, false)
	g.end, g.took = time.Now().Add(-time.Second), time.Millisecond
	if wait, _ := g.Wait(1, Max); wait != 0 {
		t.Errorf("idle writer: Wait = %v, want none", wait)
	}
	g.end, g.took = time.Now(), 100*time.Microsecond
	if wait, _ := g.Wait(1, Max); wait != 100*time.Microsecond {
		t.Errorf("after a commit of 100µs: Wait = %v, want 100µs", wait)
	}
}
