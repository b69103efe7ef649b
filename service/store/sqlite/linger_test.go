package sqlite

import (
	"testing"
	"time"
)

func ops(n int) []*writeOp { return make([]*writeOp, n) }

// TestLingerWaitsForTheCallersThereAre: the writer waits for as many
// operations as recent transactions held, not for lingerOps whatever the
// callers: 4 callers that each wait for their answer get a wait for 4.
func TestLingerWaitsForTheCallersThereAre(t *testing.T) {
	busy := func(g *gather) { g.end, g.took = time.Now(), time.Hour } // the last commit just ended

	var g gather
	busy(&g)
	if wait, _ := g.linger(ops(1)); wait != 0 {
		t.Errorf("no transaction yet: linger = %v, want none", wait)
	}

	g.committed(time.Now(), ops(4), false, false)
	busy(&g)
	wait, want := g.linger(ops(1))
	if wait != lingerMax || want != 4 {
		t.Errorf("after a transaction of 4: linger = %v for %d, want %v for 4", wait, want, lingerMax)
	}
	if wait, _ := g.linger(ops(4)); wait != 0 {
		t.Errorf("4 already queued: linger = %v, want none", wait)
	}

	// A wait that ran out lowers what the next waits for, one at a time,
	// down to no wait at all: a caller writing alone never waits.
	g.committed(time.Now(), ops(3), true, true)
	busy(&g)
	if _, want := g.linger(ops(1)); want != 3 {
		t.Errorf("after a short wait: waits for %d, want 3", want)
	}
	g.committed(time.Now(), ops(2), true, true)
	g.committed(time.Now(), ops(1), true, true)
	busy(&g)
	if wait, _ := g.linger(ops(1)); wait != 0 {
		t.Errorf("after waits in vain down to one caller: linger = %v, want none", wait)
	}

	// A larger transaction raises the peak, and one that got what it
	// waited for keeps it; the writer waits for lingerOps at most.
	g.committed(time.Now(), ops(20), false, false)
	g.committed(time.Now(), ops(10), true, false)
	busy(&g)
	if _, want := g.linger(ops(1)); want != lingerOps {
		t.Errorf("after transactions of 20 and 10: waits for %d, want %d", want, lingerOps)
	}

	// A smaller batch taken without waiting came to an idle writer: the
	// callers are fewer now (one at a time here), and nothing waits.
	g.committed(time.Now(), ops(1), false, false)
	busy(&g)
	if wait, _ := g.linger(ops(1)); wait != 0 {
		t.Errorf("after a lone operation to an idle writer: linger = %v, want none", wait)
	}

	// An idle writer (its last commit ended longer ago than it took)
	// never waits.
	g.end, g.took = time.Now().Add(-time.Second), time.Millisecond
	if wait, _ := g.linger(ops(1)); wait != 0 {
		t.Errorf("idle writer: linger = %v, want none", wait)
	}
}
