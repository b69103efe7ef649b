package backoff

import "math/rand/v2"

// Source supplies the random bits jitter draws from. Every source of
// math/rand/v2 (PCG, ChaCha8) satisfies it, so a test pins exact sequences
// with rand.NewPCG(seed1, seed2). A Source passed to Delay is used only during
// the call; whether it may be shared between goroutines is the Source's own
// business (the default one may).
type Source interface {
	Uint64() uint64
}

// uniform returns a float in [0, 1) from src, or, when src is nil, from
// math/rand/v2's global generator: safe for concurrent use, seeded by the
// runtime, free of locks.
func uniform(src Source) float64 {
	var u uint64
	if src == nil {
		u = rand.Uint64()
	} else {
		u = src.Uint64()
	}
	return float64(u>>11) * 0x1p-53
}

// Uniform returns a float in [0, 1) drawn from src (nil means the runtime's
// generator). It is exported for custom jitter functions.
func Uniform(src Source) float64 { return uniform(src) }
