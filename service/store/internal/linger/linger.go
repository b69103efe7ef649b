// Package linger decides whether a store's writer waits for more
// operations before it commits. A commit costs a WAL flush and a write of
// every page it touched whatever it holds, so while several callers keep
// the writer busy it is cheaper to wait a little for the next operations
// than to commit each alone. Callers that each wait for their answer
// before writing again come back together, and waiting for all of them
// keeps them in one commit. So the writer waits for as many operations as
// recent commits held (at most Ops), for no longer than the last commit
// took (and a bound of the caller's), and only while it is busy: a caller
// that writes alone, one call after another, never waits.
//
// Waiting for Ops whatever the callers cost every commit of 4 or 6 such
// callers a whole wait for callers that did not exist: on SQLite their
// creates ran at half the rate (retryd bench --clients 4: 1,960 against
// 4,650 tasks/s).
package linger

import "time"

// Max is the longest the writers of this module wait; Ops the most
// operations they wait for.
const (
	Max = time.Millisecond
	Ops = 8
)

// Gather is one writer's record of its recent commits. The zero value is
// ready to use; it is not safe for concurrent use.
type Gather struct {
	end  time.Time     // when the last commit ended
	took time.Duration // how long it took
	// peak is how many operations the writer waits for: the most a
	// recent commit held, one less after each wait that ran out, and
	// what came to the writer idle.
	peak int
}

// Wait returns how long to wait, at most limit, and for how many
// operations in all, before committing the queued ones, or 0: only when
// recent commits held several, the last ended moments ago (the writer is
// busy) and fewer are queued.
func (g *Gather) Wait(queued int, limit time.Duration) (wait time.Duration, want int) {
	want = min(Ops, g.peak)
	if want < 2 || queued >= want || time.Since(g.end) > g.took {
		return 0, 0
	}
	return min(limit, g.took), want
}

// Committed notes a commit of n operations that began at began; waited
// reports that the writer waited before it, short that it did in vain. A
// commit taken without waiting and smaller than the peak came to an idle
// writer (or already held all it waits for): the callers are fewer now,
// and the peak is what came.
func (g *Gather) Committed(began time.Time, n int, waited, short bool) {
	g.end = time.Now()
	g.took = g.end.Sub(began)
	switch {
	case n > g.peak:
		g.peak = n
	case short:
		g.peak--
	case !waited:
		g.peak = n
	}
}
