package backoff

import (
	"math/rand/v2"
	"sync"
)

// Source supplies the random bits jitter draws from. Every source of
// math/rand/v2 (PCG, ChaCha8) satisfies it, so a test pins exact sequences
// with rand.NewPCG(seed1, seed2).
//
// A Source used by a policy that several goroutines share (a retry.Policy's
// Rand, a Sequence per goroutine built on one Source) must be safe for
// concurrent use. math/rand/v2's PCG and ChaCha8 are not: calling one from two
// goroutines at once is a data race. Wrap such a source with Locked. The nil
// Source, which means the runtime's generator, is safe for concurrent use,
// needs no seeding and takes no lock.
type Source interface {
	Uint64() uint64
}

// Locked returns a Source that draws from src under a mutex, safe for
// concurrent use. Use it to share one seeded generator between goroutines:
// the delays stay reproducible as long as the order of the draws is.
// Locked(nil) is nil, the runtime's generator, which needs no lock.
func Locked(src Source) Source {
	switch src.(type) {
	case nil, *lockedSource:
		return src
	}
	return &lockedSource{src: src}
}

type lockedSource struct {
	mu  sync.Mutex
	src Source
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	u := l.src.Uint64()
	l.mu.Unlock()
	return u
}

// uniform returns a float in [0, 1) from src, or, when src is nil, from the
// runtime's generator (math/rand/v2's top-level functions): safe for
// concurrent use, seeded by the runtime, per thread and free of locks.
func uniform(src Source) float64 { return unit(draw(src)) }

// draw returns 64 random bits from src, or from the runtime's generator when
// src is nil.
func draw(src Source) uint64 {
	if src == nil {
		return rand.Uint64()
	}
	return src.Uint64()
}

// unit maps 64 random bits to a float in [0, 1), using the top 53.
func unit(u uint64) float64 { return float64(u>>11) * 0x1p-53 }

// Uniform returns a float in [0, 1) drawn from src (nil means the runtime's
// generator). It is exported for custom jitter functions.
func Uniform(src Source) float64 { return uniform(src) }
