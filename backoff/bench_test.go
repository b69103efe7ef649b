package backoff_test

import (
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
)

// BenchmarkDelay measures one delay computation per jitter kind, with the
// default concurrency-safe source, on a policy shared by every iteration.
func BenchmarkDelay(b *testing.B) {
	for _, j := range []backoff.Jitter{backoff.NoJitter, backoff.FullJitter, backoff.EqualJitter, backoff.ProportionalJitter, backoff.DecorrelatedJitter} {
		p := backoff.Policy{Base: 10 * time.Millisecond, Max: time.Minute, Jitter: j}
		b.Run(j.String(), func(b *testing.B) {
			b.ReportAllocs()
			var prev time.Duration
			for i := 0; b.Loop(); i++ {
				prev = p.Delay(i%20+1, prev, nil)
			}
		})
	}
	b.Run("EXPONENTIAL×1.5", func(b *testing.B) {
		p := backoff.Policy{Base: 10 * time.Millisecond, Multiplier: 1.5, Max: time.Minute}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			p.Delay(i%20+1, 0, nil)
		}
	})
}

// BenchmarkDelayParallel shares one policy between all goroutines, as a
// server's clients do.
func BenchmarkDelayParallel(b *testing.B) {
	p := backoff.Default()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := 0
		for pb.Next() {
			n = n%10 + 1
			p.Delay(n, 0, nil)
		}
	})
}
