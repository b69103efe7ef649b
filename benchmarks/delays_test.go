package benchmarks_test

import (
	"time"

	avast4 "github.com/avast/retry-go/v4"
	avast5 "github.com/avast/retry-go/v5"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/retrykit/retry/backoff"
	sethvargo "github.com/sethvargo/go-retry"
)

const (
	retries    = 10
	delayBase  = 100 * time.Millisecond
	delayLimit = 10 * time.Second
)

// delayer computes one execution's delays, before retries 1 to 10, with a
// library's own delay code: exponential from 100 ms, doubling, capped at
// 10 s, jittered. prepare builds what can be built once; the function it
// returns fills and returns its own array, so the harness allocates nothing.
//
// failsafe-go has no public way to compute a delay outside an execution, so
// it is not here.
type delayer struct {
	name    string
	jitter  string // the jitter each library offers for this
	prepare func() func() *[retries]time.Duration
}

var delayers = []delayer{
	{
		name: "retrykit", jitter: "full",
		prepare: func() func() *[retries]time.Duration {
			p := backoff.Policy{Kind: backoff.Exponential, Base: delayBase, Multiplier: 2, Max: delayLimit, Jitter: backoff.FullJitter}
			var out [retries]time.Duration
			return func() *[retries]time.Duration {
				var prev time.Duration
				for n := range retries {
					prev = p.Delay(n+1, prev, nil)
					out[n] = prev
				}
				return &out
			}
		},
	},
	{
		// ExponentialBackOff offers one jitter: ±RandomizationFactor around
		// the current interval.
		name: "cenkalti-v5", jitter: "±50%",
		prepare: func() func() *[retries]time.Duration {
			b := cenkalti.NewExponentialBackOff()
			b.InitialInterval, b.Multiplier, b.MaxInterval = delayBase, 2, delayLimit
			var out [retries]time.Duration
			return func() *[retries]time.Duration {
				b.Reset()
				for n := range retries {
					out[n] = b.NextBackOff()
				}
				return &out
			}
		},
	},
	{
		// A DelayTypeFunc takes the *Config that Do builds from the options;
		// applying the options to a Config of our own gives the same one.
		name: "avast-v4", jitter: "full",
		prepare: func() func() *[retries]time.Duration {
			cfg := &avast4.Config{}
			avast4.Delay(delayBase / 2)(cfg) // FullJitterBackoffDelay starts at Delay·2^1
			avast4.MaxDelay(delayLimit)(cfg)
			var out [retries]time.Duration
			return func() *[retries]time.Duration {
				for n := range retries {
					out[n] = avast4.FullJitterBackoffDelay(uint(n+1), nil, cfg)
				}
				return &out
			}
		},
	},
	{
		name: "avast-v5", jitter: "full",
		prepare: func() func() *[retries]time.Duration {
			r := avast5.New(avast5.Delay(delayBase/2), avast5.MaxDelay(delayLimit), avast5.DelayType(avast5.FullJitterBackoffDelay))
			var out [retries]time.Duration
			return func() *[retries]time.Duration {
				for n := range retries {
					out[n] = avast5.FullJitterBackoffDelay(uint(n+1), nil, r)
				}
				return &out
			}
		},
	},
	{
		// A Backoff counts its own calls, so each execution builds its own.
		name: "sethvargo", jitter: "full",
		prepare: func() func() *[retries]time.Duration {
			var out [retries]time.Duration
			return func() *[retries]time.Duration {
				b := sethvargo.WithFullJitter(sethvargo.WithCappedDuration(delayLimit, sethvargo.NewExponential(delayBase)))
				for n := range retries {
					out[n], _ = b.Next()
				}
				return &out
			}
		},
	},
}
