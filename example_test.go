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

// Retry an operation that fails twice, watching every attempt through an
// Observer.
func ExampleDo() {
	policy := retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Policy{Base: 10 * time.Millisecond, Jitter: backoff.NoJitter},
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			switch e.Outcome {
			case retry.Retrying:
				fmt.Printf("attempt %d/%d failed: %v; retrying in %v\n", e.Attempt, e.MaxAttempts, e.Err, e.Delay)
			case retry.Succeeded:
				fmt.Printf("attempt %d succeeded\n", e.Attempt)
			}
		}),
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
	// attempt 3 succeeded
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
	policy := retry.Policy{MaxAttempts: 2, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}
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
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond},
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
	policy := retry.Policy{MaxAttempts: 10, Quota: quota, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}
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

// A server's Retry-After hint is a floor on the wait, beyond the backoff's
// Max: retrying sooner would only spend an attempt on a server that asked
// to wait.
func ExampleAfter() {
	policy := retry.Policy{
		MaxAttempts: 2,
		Backoff:     backoff.Policy{Base: time.Millisecond, Max: 10 * time.Millisecond, Jitter: backoff.NoJitter},
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Outcome == retry.Retrying {
				fmt.Println("waiting", e.Delay)
			}
		}),
	}
	_ = retry.Do(context.Background(), policy, func(context.Context) error {
		return retry.After(30*time.Millisecond, errors.New("429 too many requests"))
	})
	// Output: waiting 30ms
}

// DoValueIf retries a call that succeeded with a value not worth keeping.
func ExampleDoValueIf() {
	policy := retry.Policy{MaxAttempts: 5, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}
	polls := 0
	state, err := retry.DoValueIf(context.Background(), policy, func(context.Context) (string, error) {
		polls++
		if polls < 3 {
			return "PENDING", nil
		}
		return "DONE", nil
	}, func(state string) bool { return state == "PENDING" })
	fmt.Println(state, polls, err)
	// Output: DONE 3 <nil>
}

// DoAttempt tells the operation which attempt it is on and why the last
// one failed.
func ExampleDoAttempt() {
	policy := retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}
	_, err := retry.DoAttempt(context.Background(), policy, func(_ context.Context, a retry.Attempt) (struct{}, error) {
		fmt.Println("attempt", a.Number, "after", a.LastErr)
		if a.Number < 2 {
			return struct{}{}, errors.New("busy")
		}
		return struct{}{}, nil
	})
	fmt.Println(err)
	// Output:
	// attempt 1 after <nil>
	// attempt 2 after busy
	// <nil>
}

// A classifier can choose the wait for the errors it knows: throttling
// waits longer than the backoff would.
func ExampleRetryAfterIf() {
	errThrottled := errors.New("throttled")
	policy := retry.Policy{
		MaxAttempts: 2,
		Backoff:     backoff.Policy{Base: time.Millisecond, Jitter: backoff.NoJitter},
		Classifier:  retry.Classifiers{retry.RetryAfterIf(func(err error) bool { return errors.Is(err, errThrottled) }, 20*time.Millisecond)},
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			if e.Outcome == retry.Retrying {
				fmt.Println("waiting", e.Delay)
			}
		}),
	}
	_ = retry.Do(context.Background(), policy, func(context.Context) error { return errThrottled })
	// Output: waiting 20ms
}

// Policies travel as JSON with the service's field names.
func ExamplePolicy_UnmarshalJSON() {
	var p retry.Policy
	err := json.Unmarshal([]byte(`{"maxAttempts":5,"initialDelayMs":200,"jitterType":"EQUAL","totalBudgetMs":60000}`), &p)
	fmt.Println(p.MaxAttempts, p.Backoff.Base, p.Backoff.Jitter, p.Budget, err)
	// Output: 5 200ms EQUAL 1m0s <nil>
}

// A SCHEDULE lists the delays themselves; past its end the last one repeats
// until maxAttempts or the budget stops the task.
func ExamplePolicy_schedule() {
	var p retry.Policy
	err := json.Unmarshal([]byte(`{"backoff":"SCHEDULE","delaysMs":[1000,5000,30000,300000],
		"maxDelayMs":600000,"jitterType":"NONE","maxAttempts":7}`), &p)
	if err != nil {
		fmt.Println(err)
		return
	}
	for n := 1; n < p.Attempts(); n++ {
		fmt.Printf("retry %d after %v\n", n, p.Backoff.Delay(n, 0, nil))
	}
	// Output:
	// retry 1 after 1s
	// retry 2 after 5s
	// retry 3 after 30s
	// retry 4 after 5m0s
	// retry 5 after 5m0s
	// retry 6 after 5m0s
}

// maxDoublings limits an exponential backoff's growth as Cloud Tasks does:
// after that many doublings the delay grows linearly, by the delay reached.
func ExamplePolicy_maxDoublings() {
	p := retry.Policy{MaxAttempts: 9, Backoff: backoff.Policy{
		Base: 10 * time.Second, Max: 300 * time.Second, MaxDoublings: 3, Jitter: backoff.NoJitter}}
	for n := 1; n < p.Attempts(); n++ {
		fmt.Print(p.Backoff.Delay(n, 0, nil), " ")
	}
	fmt.Println()
	// Output: 10s 20s 40s 1m20s 2m40s 4m0s 5m0s 5m0s
}

type getUser struct{ id string }

// Wrap adds retries to any handler of the shape func(ctx, Req) (Resp, error).
func ExampleWrap() {
	calls := 0
	fetch := retry.Wrap(retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}, func(ctx context.Context, r getUser) (string, error) {
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

// A Limiter shared by every call to one dependency: when the dependency
// asks to slow down (a 429, a Retry-After) or is out (most answers 503,
// refused, timed out), the rate at which attempts go falls for all of them;
// as calls succeed it climbs back. The Policy still decides whether to
// retry; the limiter decides when an attempt may go.
func ExampleLimiter() {
	limiter, err := retry.NewLimiter(retry.LimiterConfig{Floor: 10, Ceiling: 100, Increase: 10})
	if err != nil {
		panic(err)
	}
	policy := retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Base: time.Millisecond, Jitter: backoff.NoJitter},
		Limiter:     limiter,
		Observer: retry.OnRetry(func(_ context.Context, e retry.Event) {
			fmt.Printf("attempt %d: %v; rate now %.0f/s\n", e.Attempt, e.Err, limiter.Rate())
		}),
	}
	fmt.Printf("rate before: %.0f/s\n", limiter.Rate())
	calls := 0
	err = retry.Do(context.Background(), policy, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return overloadedError{} // a 429
		}
		return nil
	})
	fmt.Println("err:", err)
	fmt.Printf("rate after a success: %.0f/s\n", limiter.Rate())
	// Output:
	// rate before: 100/s
	// attempt 1: 429 Too Many Requests; rate now 10/s
	// err: <nil>
	// rate after a success: 11/s
}

type overloadedError struct{}

func (overloadedError) Error() string       { return "429 Too Many Requests" }
func (overloadedError) HTTPStatusCode() int { return 429 }
