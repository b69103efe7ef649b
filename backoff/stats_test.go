package backoff_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
)

// TestJitterDistributions draws 200,000 delays from each jitter with the
// default (runtime) source and checks that every value lies in the jitter's
// range and that the mean sits where the formula puts it. The tolerance, 1% of
// the range's width, is over ten standard errors: a pass is no accident and a
// failure is no fluke.
func TestJitterDistributions(t *testing.T) {
	t.Parallel()
	const samples = 200_000
	d := time.Second
	tests := []struct {
		name     string
		policy   backoff.Policy
		prev     time.Duration
		lo, hi   time.Duration
		wantMean time.Duration
	}{
		{"full", backoff.Policy{Kind: backoff.Fixed, Base: d}, 0, 0, d, d / 2},
		// Exponential doubling with full jitter has a path of its own in
		// Delay, and one more step for a Min.
		{"full, doubling", backoff.Policy{Base: d / 4}, 0, 0, d, d / 2},
		{"full, doubling with a floor", backoff.Policy{Base: d / 4, Min: d / 2}, 0, d / 2, d, 5 * d / 8},
		{"equal", backoff.Policy{Kind: backoff.Fixed, Base: d, Jitter: backoff.EqualJitter}, 0, d / 2, d, 3 * d / 4},
		{"proportional 0.1", backoff.Policy{Kind: backoff.Fixed, Base: d, Jitter: backoff.ProportionalJitter}, 0, 9 * d / 10, 11 * d / 10, d},
		{"proportional 1", backoff.Policy{Kind: backoff.Fixed, Base: d, Jitter: backoff.ProportionalJitter, JitterFactor: 1}, 0, 0, 2 * d, d},
		{"decorrelated first", backoff.Policy{Base: d, Jitter: backoff.DecorrelatedJitter}, 0, d, 3 * d, 2 * d},
		{"decorrelated from prev", backoff.Policy{Base: d, Jitter: backoff.DecorrelatedJitter}, 4 * d, d, 12 * d, 13 * d / 2},
		{"decorrelated capped", backoff.Policy{Base: d, Max: 5 * d, Jitter: backoff.DecorrelatedJitter}, 4 * d, d, 5 * d, 3 * d},
		{"none", backoff.Policy{Kind: backoff.Fixed, Base: d, Jitter: backoff.NoJitter}, 0, d, d, d},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sum float64
			for range samples {
				got := tt.policy.Delay(3, tt.prev, nil)
				if got < tt.lo || got > tt.hi {
					t.Fatalf("Delay = %v, outside [%v, %v]", got, tt.lo, tt.hi)
				}
				sum += float64(got)
			}
			mean := sum / samples
			tolerance := 0.01*float64(tt.hi-tt.lo) + 1
			if math.Abs(mean-float64(tt.wantMean)) > tolerance {
				t.Errorf("mean = %v, want %v ± %v", time.Duration(mean), tt.wantMean, time.Duration(tolerance))
			}
		})
	}
}

// TestSeededSourceIsDeterministic pins that two sequences with equally seeded
// sources agree, which is what makes simulations and tests reproducible.
func TestSeededSourceIsDeterministic(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.DecorrelatedJitter}
	a := backoff.NewSequence(p, rand.NewPCG(7, 11))
	b := backoff.NewSequence(p, rand.NewPCG(7, 11))
	other := backoff.NewSequence(p, rand.NewPCG(8, 11))
	differs := false
	for i := range 50 {
		x, y, z := a.Next(), b.Next(), other.Next()
		if x != y {
			t.Fatalf("delay %d: %v and %v from equal seeds", i, x, y)
		}
		differs = differs || x != z
	}
	if !differs {
		t.Error("a different seed gave the very same 50 delays")
	}
}
