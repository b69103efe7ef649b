package backoff

import "time"

// Sequence hands out the delays of one execution in order: the delay before
// retry 1, then retry 2, and so on. It carries the per-execution state (the
// retry number and the previous delay) so that the Policy it reads stays
// immutable. A Sequence belongs to one goroutine; make one per execution.
type Sequence struct {
	policy Policy
	src    Source
	n      int
	prev   time.Duration
}

// NewSequence starts a sequence of p's delays drawing randomness from src
// (nil means the runtime's generator).
func NewSequence(p Policy, src Source) *Sequence {
	return &Sequence{policy: p, src: src}
}

// Next returns the delay before the next retry.
func (s *Sequence) Next() time.Duration {
	s.n++
	s.prev = s.policy.Delay(s.n, s.prev, s.src)
	return s.prev
}

// Retries reports how many delays Next has handed out.
func (s *Sequence) Retries() int { return s.n }

// Reset starts the sequence over, as if new.
func (s *Sequence) Reset() { s.n, s.prev = 0, 0 }
