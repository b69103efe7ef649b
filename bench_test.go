package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// BenchmarkDoSuccess is the path almost every call takes: a shared policy
// and an operation that succeeds at once.
func BenchmarkDoSuccess(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	policies := map[string]retry.Policy{
		"default": {},
		"budget":  {Budget: time.Second},
	}
	quota, _ := retry.NewQuota(retry.QuotaConfig{})
	policies["quota"] = retry.Policy{Quota: quota}
	for name, p := range policies {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = retry.Do(ctx, p, op)
			}
		})
	}
}

// BenchmarkDoSuccessParallel shares one policy between all goroutines.
func BenchmarkDoSuccessParallel(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{MaxAttempts: 5}
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = retry.Do(ctx, p, op)
		}
	})
}

// BenchmarkDoOneRetry fails once and then succeeds, with zero delay: the
// cost of the retry machinery itself.
func BenchmarkDoOneRetry(b *testing.B) {
	ctx := context.Background()
	p := retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}}
	n := 0
	op := func(context.Context) error {
		n++
		if n%2 == 1 {
			return errFlaky
		}
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = retry.Do(ctx, p, op)
	}
}

// BenchmarkDoValueSuccess is DoValue's success path.
func BenchmarkDoValueSuccess(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		_, _ = retry.DoValue(ctx, retry.Policy{}, op)
	}
}

// BenchmarkLimiter is the success path through a shared Limiter: Do waits
// for a slot (there always is one: the ceiling is far above the calls) and
// reports the success. It must not allocate.
func BenchmarkLimiter(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	l, err := retry.NewLimiter(retry.LimiterConfig{Floor: 1e9, Ceiling: 1e12, Burst: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	p := retry.Policy{Limiter: l}
	b.Run("Do", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = retry.Do(ctx, p, op)
		}
	})
	b.Run("DoParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = retry.Do(ctx, p, op)
			}
		})
	})
	b.Run("ReserveReport", func(b *testing.B) {
		b.ReportAllocs()
		now := time.Now()
		for b.Loop() {
			_, _ = l.Reserve(now, -1)
			l.Report(now, nil)
		}
	})
}
