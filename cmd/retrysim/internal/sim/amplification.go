package sim

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Defaults of the amplification experiment.
const (
	DefaultLayers   = 3
	DefaultAttempts = 3
	DefaultRequests = 10000
)

// DefaultFailureRates returns the bottom layer's failure rates the experiment
// tries by default: 1%, 10%, 50% and 100%.
func DefaultFailureRates() []float64 { return []float64{0.01, 0.1, 0.5, 1} }

// AmplificationConfig is one configuration of the amplification experiment.
//
// A user request enters the top of Layers services; each calls the one below
// it through retry.Do with MaxAttempts Attempts, and the last calls the
// bottom (a database, say), which fails with probability FailureRate. No
// layer tells its caller not to retry, so a failure deep down is retried at
// every layer above it. With a Quota each layer shares one retry.Quota,
// made from it, between all the requests it serves, as a service would.
// Waits are zero: time plays no part in how many calls are made.
type AmplificationConfig struct {
	Layers      int
	Attempts    int
	FailureRate float64
	Requests    int                // user requests, served one after another
	Quota       *retry.QuotaConfig // nil means no retry budget
	Seed        uint64
}

// AmplificationResult is what one configuration measured.
type AmplificationResult struct {
	Requests    int // user requests
	BottomCalls int // calls that reached the bottom
	Succeeded   int // user requests that succeeded
}

// BottomPerRequest returns the calls reaching the bottom per user request.
func (r AmplificationResult) BottomPerRequest() float64 {
	return float64(r.BottomCalls) / float64(r.Requests)
}

// SuccessRate returns the share of user requests that succeeded.
func (r AmplificationResult) SuccessRate() float64 {
	return float64(r.Succeeded) / float64(r.Requests)
}

var errBottom = errors.New("bottom layer failed")

// RunAmplification serves c.Requests user requests through real retry.Do
// calls. It returns an error if Layers, Attempts or Requests is below 1, the
// failure rate is outside [0, 1] or the quota is invalid, and ctx's error if
// ctx ends first. Each call makes its own quotas, so any number may run at
// once.
func RunAmplification(ctx context.Context, c AmplificationConfig) (AmplificationResult, error) {
	switch {
	case c.Layers < 1 || c.Attempts < 1 || c.Requests < 1:
		return AmplificationResult{}, errors.New("amplification: layers, attempts and requests must be at least 1")
	case !(c.FailureRate >= 0 && c.FailureRate <= 1):
		return AmplificationResult{}, errors.New("amplification: the failure rate must be within [0, 1]")
	}
	policies := make([]retry.Policy, c.Layers)
	for i := range policies {
		policies[i] = retry.Policy{
			MaxAttempts: c.Attempts,
			Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter},
		}
		if c.Quota != nil {
			q, err := retry.NewQuota(*c.Quota)
			if err != nil {
				return AmplificationResult{}, err
			}
			policies[i].Quota = q
		}
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0))
	res := AmplificationResult{Requests: c.Requests}
	var call func(ctx context.Context, layer int) error
	call = func(ctx context.Context, layer int) error {
		if layer == c.Layers {
			res.BottomCalls++
			if rng.Float64() < c.FailureRate {
				return errBottom
			}
			return nil
		}
		return retry.Do(ctx, policies[layer], func(ctx context.Context) error { return call(ctx, layer+1) })
	}
	for range c.Requests {
		if err := ctx.Err(); err != nil {
			return AmplificationResult{}, err
		}
		if call(ctx, 0) == nil {
			res.Succeeded++
		}
	}
	return res, nil
}
