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
