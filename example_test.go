package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Retry an operation that fails twice, watching each retry through the hook.
func ExampleDo() {
	policy := retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Policy{Base: 10 * time.Millisecond, Jitter: backoff.NoJitter},
		OnRetry: func(_ context.Context, a retry.Attempt) {
			fmt.Printf("attempt %d/%d failed: %v; retrying in %v\n", a.Number, a.MaxAttempts, a.Err, a.Delay)
		},
	}
	calls := 0
	err := retry.Do(context.Background(), policy, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection reset")
		}
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// attempt 1/4 failed: connection reset; retrying in 10ms
	// attempt 2/4 failed: connection reset; retrying in 20ms
	// err: <nil>
}

// DoValue returns the value of the first successful call.
func ExampleDoValue() {
	policy := retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}
	calls := 0
	n, err := retry.DoValue(context.Background(), policy, func(ctx context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("busy")
		}
		return 42, nil
	})
	fmt.Println(n, err)
	// Output: 42 <nil>
}

// The error Do returns says why it stopped and still reaches the last error.
func ExampleError() {
	errDown := errors.New("service down")
	policy := retry.Policy{MaxAttempts: 2, Backoff: backoff.Policy{Kind: backoff.Fixed}}
	err := retry.Do(context.Background(), policy, func(context.Context) error { return errDown })

	var re *retry.Error
	fmt.Println(errors.Is(err, retry.ErrAttemptsExhausted), errors.Is(err, errDown), errors.As(err, &re) && re.Attempts == 2)
	fmt.Println(err)
	// Output:
	// true true true
	// retry: attempts exhausted after 2 attempts: service down
}

// Permanent stops at once, whatever the classifier says.
func ExamplePermanent() {
	calls := 0
	err := retry.Do(context.Background(), retry.Policy{MaxAttempts: 5}, func(context.Context) error {
		calls++
		return retry.Permanent(errors.New("card declined"))
	})
	fmt.Println(calls, errors.Is(err, retry.ErrNotRetryable))
	// Output: 1 true
}

// A classifier chooses what is worth retrying: here, only timeouts and
// refused connections.
func ExampleClassifiers() {
	errTimeout := errors.New("timeout")
	policy := retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Fixed},
		Classifier: retry.Classifiers{
			retry.RetryOn(errTimeout),
			retry.Transient(),
		},
	}
	err := retry.Do(context.Background(), policy, func(context.Context) error { return errors.New("invalid argument") })
	fmt.Println(errors.Is(err, retry.ErrNotRetryable))
	// Output: true
}

// A Quota shared by all callers of a downstream stops retry storms: when
// most calls fail, the bucket empties and callers stop retrying.
func ExampleQuota() {
	quota, err := retry.NewQuota(retry.QuotaConfig{Capacity: 2, RetryCost: 1, SuccessRefill: 0.1})
	if err != nil {
		panic(err)
	}
	policy := retry.Policy{MaxAttempts: 10, Quota: quota, Backoff: backoff.Policy{Kind: backoff.Fixed}}
	calls := 0
	err = retry.Do(context.Background(), policy, func(context.Context) error { calls++; return errors.New("overloaded") })
	fmt.Println(calls, errors.Is(err, retry.ErrQuotaExhausted))
	// Output: 3 true
}

// A Budget bounds the whole execution: Do stops before a retry that could
// not finish in time instead of sleeping for nothing.
func ExamplePolicy_budget() {
	policy := retry.Policy{
		MaxAttempts: 100,
		Budget:      50 * time.Millisecond,
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: 20 * time.Millisecond, Jitter: backoff.NoJitter},
	}
	err := retry.Do(context.Background(), policy, func(context.Context) error { return errors.New("unavailable") })
	fmt.Println(errors.Is(err, retry.ErrBudgetExhausted))
	// Output: true
}

// A server's Retry-After hint lengthens the wait (up to the backoff's Max).
func ExampleAfter() {
	policy := retry.Policy{
		MaxAttempts: 2,
		Backoff:     backoff.Policy{Base: time.Millisecond, Max: 30 * time.Millisecond, Jitter: backoff.NoJitter},
		OnRetry:     func(_ context.Context, a retry.Attempt) { fmt.Println("waiting", a.Delay) },
	}
	_ = retry.Do(context.Background(), policy, func(context.Context) error {
		return retry.After(time.Minute, errors.New("429 too many requests"))
	})
	// Output: waiting 30ms
}

// Policies travel as JSON with the service's field names.
func ExamplePolicy_UnmarshalJSON() {
	var p retry.Policy
	err := json.Unmarshal([]byte(`{"maxAttempts":5,"initialDelayMs":200,"jitterType":"EQUAL","totalBudgetMs":60000}`), &p)
	fmt.Println(p.MaxAttempts, p.Backoff.Base, p.Backoff.Jitter, p.Budget, err)
	// Output: 5 200ms EQUAL 1m0s <nil>
}

type getUser struct{ id string }

// Wrap adds retries to any handler of the shape func(ctx, Req) (Resp, error).
func ExampleWrap() {
	calls := 0
	fetch := retry.Wrap(retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed}}, func(ctx context.Context, r getUser) (string, error) {
		calls++
		if calls == 1 {
			return "", errors.New("timeout")
		}
		return "user " + r.id, nil
	})
	name, err := fetch(context.Background(), getUser{"7"})
	fmt.Println(name, err)
	// Output: user 7 <nil>
}

// A jittered ticker for heartbeats: every 10ms ± 50%, so a fleet never
// beats in step.
func ExampleNewTicker() {
	ticker, err := retry.NewTicker(backoff.Policy{
		Kind: backoff.Fixed, Base: 10 * time.Millisecond, Jitter: backoff.ProportionalJitter, JitterFactor: 0.5,
	}, nil)
	if err != nil {
		panic(err)
	}
	defer ticker.Stop()
	for range 3 {
		<-ticker.C
	}
	fmt.Println("three heartbeats")
	// Output: three heartbeats
}
