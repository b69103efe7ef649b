package benchmarks_test

import (
	"context"
	"errors"
	"time"

	avast4 "github.com/avast/retry-go/v4"
	avast5 "github.com/avast/retry-go/v5"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	sethvargo "github.com/sethvargo/go-retry"
)

// contender is one library set up for the workloads. Each prepare builds the
// library's policy around op once, as a program would at start-up, and
// returns one retried call of op.
type contender struct {
	name string
	// typical: up to 3 attempts, exponential backoff from 100 ms with the
	// library's jitter. Used for the success path, where it never waits.
	typical func(op func() error) func() error
	// zeroDelay: up to 3 attempts, no wait between them.
	zeroDelay func(op func() error) func() error
}

var contenders = []contender{
	{
		name: "retrykit",
		typical: func(op func() error) func() error {
			ctx := context.Background()
			p := retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Base: 100 * time.Millisecond, Max: 10 * time.Second}}
			fn := func(context.Context) error { return op() }
			return func() error { return retry.Do(ctx, p, fn) }
		},
		zeroDelay: func(op func() error) func() error {
			ctx := context.Background()
			p := retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}}
			fn := func(context.Context) error { return op() }
			return func() error { return retry.Do(ctx, p, fn) }
		},
	},
	{
		// An ExponentialBackOff keeps its state inside and Retry resets it:
		// sharing one between goroutines is a data race, so a concurrent
		// program needs one per call. Sequential benchmarks may share it.
		name: "cenkalti-v5",
		typical: func(op func() error) func() error {
			ctx := context.Background()
			b := cenkalti.NewExponentialBackOff()
			b.InitialInterval, b.Multiplier, b.MaxInterval = 100*time.Millisecond, 2, 10*time.Second
			opts := []cenkalti.RetryOption{cenkalti.WithBackOff(b), cenkalti.WithMaxTries(3)}
			fn := func() (struct{}, error) { return struct{}{}, op() }
			return func() error { _, err := cenkalti.Retry(ctx, fn, opts...); return err }
		},
		zeroDelay: func(op func() error) func() error {
			ctx := context.Background()
			opts := []cenkalti.RetryOption{cenkalti.WithBackOff(&cenkalti.ZeroBackOff{}), cenkalti.WithMaxTries(3)}
			fn := func() (struct{}, error) { return struct{}{}, op() }
			return func() error { _, err := cenkalti.Retry(ctx, fn, opts...); return err }
		},
	},
	{
		name: "avast-v4",
		typical: func(op func() error) func() error {
			opts := []avast4.Option{avast4.Attempts(3), avast4.Delay(100 * time.Millisecond),
				avast4.MaxDelay(10 * time.Second), avast4.DelayType(avast4.FullJitterBackoffDelay)}
			return func() error { return avast4.Do(op, opts...) }
		},
		zeroDelay: func(op func() error) func() error {
			opts := []avast4.Option{avast4.Attempts(3), avast4.Delay(0), avast4.DelayType(avast4.FixedDelay)}
			return func() error { return avast4.Do(op, opts...) }
		},
	},
	{
		name: "avast-v5",
		typical: func(op func() error) func() error {
			r := avast5.New(avast5.Attempts(3), avast5.Delay(100*time.Millisecond),
				avast5.MaxDelay(10*time.Second), avast5.DelayType(avast5.FullJitterBackoffDelay))
			return func() error { return r.Do(op) }
		},
		zeroDelay: func(op func() error) func() error {
			r := avast5.New(avast5.Attempts(3), avast5.Delay(0), avast5.DelayType(avast5.FixedDelay))
			return func() error { return r.Do(op) }
		},
	},
	{
		name: "failsafe-go",
		typical: func(op func() error) func() error {
			rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(3).
				WithBackoff(100*time.Millisecond, 10*time.Second).WithJitterFactor(0.5).Build()
			ex := failsafe.With(rp)
			return func() error { return ex.Run(op) }
		},
		zeroDelay: func(op func() error) func() error {
			ex := failsafe.With(retrypolicy.NewBuilder[any]().WithMaxAttempts(3).Build())
			return func() error { return ex.Run(op) }
		},
	},
	{
		// go-retry keeps the attempt count inside the Backoff: one that
		// limits retries must be built for every call.
		name: "sethvargo",
		typical: func(op func() error) func() error {
			ctx := context.Background()
			fn := retryable(op)
			return func() error {
				b := sethvargo.WithMaxRetries(2, sethvargo.WithFullJitter(
					sethvargo.WithCappedDuration(10*time.Second, sethvargo.NewExponential(100*time.Millisecond))))
				return sethvargo.Do(ctx, b, fn)
			}
		},
		zeroDelay: func(op func() error) func() error {
			ctx := context.Background()
			fn := retryable(op)
			zero := sethvargo.BackoffFunc(func() (time.Duration, bool) { return 0, false })
			return func() error { return sethvargo.Do(ctx, sethvargo.WithMaxRetries(2, zero), fn) }
		},
	},
}

// retryable marks op's errors retryable, as go-retry requires.
func retryable(op func() error) sethvargo.RetryFunc {
	return func(context.Context) error {
		if err := op(); err != nil {
			return sethvargo.RetryableError(err)
		}
		return nil
	}
}

var errFlaky = errors.New("flaky")

// flaky fails until it has been called fails times, then succeeds.
type flaky struct{ calls, fails int }

func (f *flaky) call() error {
	f.calls++
	if f.calls <= f.fails {
		return errFlaky
	}
	return nil
}
