package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/retrykit/retry/backoff"
)

// Strategy is a named backoff policy under test. Simulated clients ask its
// Backoff for each delay through backoff.Policy.Delay.
type Strategy struct {
	Name    string
	Backoff backoff.Policy
}

// The strategy names, in the order the experiments report them.
const (
	NoBackoff    = "none"         // retry at once
	Exponential  = "exponential"  // exponential, no jitter
	EqualJitter  = "equal"        // exponential, equal jitter
	FullJitter   = "full"         // exponential, full jitter
	Decorrelated = "decorrelated" // decorrelated jitter
)

// Strategies returns the five strategies with the engine's own numbering:
// the exponential ones wait base·2^(n−1) (capped at max, then jittered)
// before retry n, so the first wait is base; decorrelated jitter grows from
// base. "none" is a fixed zero delay.
func Strategies(base, max time.Duration) []Strategy {
	exp := func(j backoff.Jitter) backoff.Policy {
		return backoff.Policy{Kind: backoff.Exponential, Base: base, Multiplier: 2, Max: max, Jitter: j}
	}
	return []Strategy{
		{NoBackoff, backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}},
		{Exponential, exp(backoff.NoJitter)},
		{EqualJitter, exp(backoff.EqualJitter)},
		{FullJitter, exp(backoff.FullJitter)},
		{Decorrelated, backoff.Policy{Kind: backoff.Exponential, Base: base, Max: max, Jitter: backoff.DecorrelatedJitter}},
	}
}

// PostStrategies returns the five strategies of the AWS post, mapped onto
// the engine's parameters without changing the engine.
//
// The post's exponential, full and equal jitter start from min(cap,
// base·2^n) with n = 1 at the first failure, so their first un-jittered wait
// is 2·base. The engine computes Base·Multiplier^(n−1) for retry n, and retry
// n follows the n-th failure, so Base = 2·base and Multiplier = 2 give the
// same raw delay for every n; jitter is then applied to the capped delay, as
// in the post. Decorrelated jitter is sleep = min(cap, uniform(base,
// sleep·3)) with sleep starting at base in the post, and uniform in [Base,
// min(Max, prev·3)] with prev starting at Base in the engine: Base = base.
// The two differ only once prev·3 exceeds the cap, where the post piles the
// excess probability onto the cap itself and the engine spreads it over
// [base, cap].
func PostStrategies(base, cap time.Duration) []Strategy {
	s := Strategies(2*base, cap)
	for i := range s {
		if s[i].Name == Decorrelated {
			s[i].Backoff.Base = base
		}
	}
	return s
}

// Select returns the strategies of all named in names, in the order of
// names; an empty names selects all.
func Select(all []Strategy, names []string) ([]Strategy, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []Strategy
	for _, name := range names {
		i := slices.IndexFunc(all, func(s Strategy) bool { return s.Name == name })
		if i < 0 {
			known := make([]string, len(all))
			for j, s := range all {
				known[j] = s.Name
			}
			return nil, fmt.Errorf("unknown strategy %q (want one of %s)", name, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Defaults of Latency.
const (
	DefaultLatencyMean   = 10 * time.Millisecond
	DefaultLatencyStdDev = 2 * time.Millisecond
)

// Latency is the time one message takes to cross the network: the absolute
// value of a normal variate with mean Mean and standard deviation StdDev.
// The zero Latency means DefaultLatencyMean and DefaultLatencyStdDev.
type Latency struct {
	Mean, StdDev time.Duration
}

func (l Latency) orDefault() Latency {
	if l == (Latency{}) {
		return Latency{DefaultLatencyMean, DefaultLatencyStdDev}
	}
	return l
}

func (l Latency) draw(r *rand.Rand) time.Duration {
	return time.Duration(math.Abs(float64(l.Mean) + float64(l.StdDev)*r.NormFloat64()))
}

// streams returns a run's two random streams: one for the network, one for
// jitter. They depend on the seed, the client count and the run, not on the
// strategy, so every strategy meets the same network draws at the start.
func streams(seed uint64, clients, run int) (network *rand.Rand, jitter *rand.PCG) {
	stream := uint64(clients)<<40 | uint64(run)<<1
	return rand.New(rand.NewPCG(seed, stream)), rand.NewPCG(seed, stream|1)
}
