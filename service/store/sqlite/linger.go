package sqlite

import "time"

// fill adds the operations already waiting to batch.
func (s *Store) fill(batch *[]*writeOp) {
	for len(*batch) < maxBatchOps {
		select {
		case op := <-s.ops:
			*batch = append(*batch, op)
		default:
			return
		}
	}
}

// await adds operations to batch as they come, for up to d or until it
// holds want. short reports that d ran out first.
func (s *Store) await(batch *[]*writeOp, d time.Duration, want int) (short bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(*batch) < want {
		select {
		case op := <-s.ops:
			*batch = append(*batch, op)
		case <-timer.C:
			return true
		case <-s.quit:
			return false
		}
	}
	s.fill(batch)
	return false
}

// Lingering: a commit costs an fsync and a write of every page it touched
// whatever it holds, so while several callers keep the writer busy it is
// cheaper to wait a little for the next operations than to commit each
// alone. The writer waits for as many operations as recent transactions
// held (at most lingerOps): callers that each wait for their answer before
// writing again come back together, and waiting for all of them keeps
// them in one commit. It waited for lingerOps whatever the callers, which
// cost every transaction of 4 or 6 such callers a whole wait for callers
// that did not exist: their creates ran at half the rate (retryd bench
// --clients 4: 1,960 against 4,650 tasks/s). A caller that writes alone,
// one call after another, never waits.
const (
	lingerMax = time.Millisecond // and never longer than the last commit took
	lingerOps = 8                // the most the writer waits for
)

// gather decides whether the writer lingers; see lingerMax. Only the
// writer goroutine uses it.
type gather struct {
	end  time.Time     // when the last transaction committed
	took time.Duration // how long it took
	// peak is how many operations the writer waits for: the most a
	// recent transaction held, one less after each wait that ran out,
	// and what came to the writer idle.
	peak int
}

// committed notes a transaction of batch that began at began; waited
// reports that the writer lingered before it, short that it did in vain.
// A batch taken without lingering and smaller than the peak came to an
// idle writer (or already held all the writer waits for): the callers are
// fewer now, and the peak is what came.
func (g *gather) committed(began time.Time, batch []*writeOp, waited, short bool) {
	g.end = time.Now()
	g.took = g.end.Sub(began)
	switch {
	case len(batch) > g.peak:
		g.peak = len(batch)
	case short:
		g.peak--
	case !waited:
		g.peak = len(batch)
	}
}

// linger returns how long to wait, and for how many operations in all,
// before running batch, or 0: only when recent transactions held several,
// the last ended moments ago (the writer is busy) and batch holds fewer.
func (g *gather) linger(batch []*writeOp) (wait time.Duration, want int) {
	want = min(lingerOps, g.peak)
	if want < 2 || len(batch) >= want || time.Since(g.end) > g.took {
		return 0, 0
	}
	return min(lingerMax, g.took), want
}
