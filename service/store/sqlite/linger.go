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
// holds lingerOps.
func (s *Store) await(batch *[]*writeOp, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(*batch) < lingerOps {
		select {
		case op := <-s.ops:
			*batch = append(*batch, op)
		case <-timer.C:
			return
		case <-s.quit:
			return
		}
	}
	s.fill(batch)
}

// Lingering: a commit costs an fsync and a write of every page it touched
// whatever it holds, so while several callers keep the writer busy it is
// cheaper to wait a little for the next operations than to commit each
// alone. At 2,000 tasks a second (a create, a claim and a finish each)
// waiting up to a millisecond cuts the commits about fourfold and the CPU
// per task by a fifth. A caller that writes alone, one call after another,
// never waits: lingering starts only after a batch of several operations.
const (
	lingerMax = time.Millisecond // and never longer than the last commit took
	lingerOps = 8                // stop waiting once this many are queued
)

// gather decides whether the writer lingers; see lingerMax. Only the
// writer goroutine uses it.
type gather struct {
	end  time.Time     // when the last transaction committed
	took time.Duration // how long it took
	ops  int           // how many operations it held
}

func (g *gather) committed(began time.Time, ops int) {
	g.end = time.Now()
	g.took, g.ops = g.end.Sub(began), ops
}

// linger returns how long to wait for more operations before running a
// batch of n, or 0: only when the last transaction held several, ended
// moments ago (the writer is busy) and this batch is small.
func (g *gather) linger(n int) time.Duration {
	if n >= lingerOps || g.ops < 2 || time.Since(g.end) > g.took {
		return 0
	}
	return min(lingerMax, g.took)
}
