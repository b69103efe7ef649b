package retry_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// TestQuotaUnderConcurrency runs 64 always-failing executions at once against
// a quota of 10 retries: exactly 10 retries happen in all, and every other
// execution stops with ErrQuotaExhausted.
func TestQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	q, err := retry.NewQuota(retry.QuotaConfig{Capacity: 10, RetryCost: 1, SuccessRefill: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	p := retry.Policy{MaxAttempts: 3, Quota: q, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}}
	var calls, quotaStops atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := retry.Do(context.Background(), p, func(context.Context) error { calls.Add(1); return errFlaky })
			if errors.Is(err, retry.ErrQuotaExhausted) {
				quotaStops.Add(1)
			}
		}()
	}
	wg.Wait()
	if retries := calls.Load() - 64; retries != 10 {
		t.Errorf("retries = %d, want 10", retries)
	}
	if quotaStops.Load() < 64-10 {
		t.Errorf("%d executions stopped on the quota, want at least 54", quotaStops.Load())
	}
	if q.Available() != 0 {
		t.Errorf("Available = %v, want 0", q.Available())
	}
	for range 6 {
		if err := retry.Do(context.Background(), p, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.Available(); got != 3 {
		t.Errorf("after 6 successes refilling 0.5 each, Available = %v, want 3", got)
	}
	for range 100 {
		q.Refill()
	}
	if got := q.Available(); got != 10 {
		t.Errorf("refilled past capacity: Available = %v, want 10", got)
	}
}

func TestNewQuotaValidates(t *testing.T) {
	t.Parallel()
	q, err := retry.NewQuota(retry.QuotaConfig{})
	if err != nil || q.Available() != retry.DefaultQuotaCapacity {
		t.Errorf("zero config: %v, %v; want a full default quota", q, err)
	}
	_, err = retry.NewQuota(retry.QuotaConfig{Capacity: -1, RetryCost: nan()})
	if got := len(backoff.FieldErrors(err)); got != 2 {
		t.Errorf("NewQuota with two bad fields reported %d problems: %v", got, err)
	}
}

func nan() float64 { var z float64; return z / z }
