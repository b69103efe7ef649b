package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Strategy is a named backoff policy under test, with what else the
// clients do to hold back. Simulated clients ask its Backoff for each delay
// through backoff.Policy.Delay; Quota and Limiter are the library's own
// retry.Quota and retry.Limiter, run on the simulation's clock.
type Strategy struct {
	Name    string
	Backoff backoff.Policy
	// Quota, when set, is one retry.Quota shared by every client: a retry
	// it refuses ends the client's request unserved.
	Quota *retry.QuotaConfig
	// Limiter, when set, is a retry.Limiter each client waits for before
	// every attempt and reports every answer to: one per client, or one
	// shared by all when SharedLimiter is set (as retryd shares one per
	// host).
	Limiter       *retry.LimiterConfig
	SharedLimiter bool
	// AWSAdaptive gives each client a model of the AWS SDK's adaptive retry
	// mode (see awsAdaptive): a CUBIC token bucket, and the standard mode's
	// retry quota of 500 tokens. With SharedLimiter, one bucket serves all
	// clients, and there is no quota.
	AWSAdaptive bool
}

// feedback reports whether the clients act on each answer (report it,
// count it), not only wait and send again.
func (s *Strategy) feedback() bool {
	return s.Quota != nil || s.Limiter != nil || s.AWSAdaptive
}

// The strategy names, in the order the experiments report them.
const (
	NoBackoff    = "none"         // retry at once
	Exponential  = "exponential"  // exponential, no jitter
	EqualJitter  = "equal"        // exponential, equal jitter
	FullJitter   = "full"         // exponential, full jitter
	Decorrelated = "decorrelated" // decorrelated jitter

	FullQuota     = "full+quota"     // full jitter, a shared retry quota (the AWS standard mode's)
	AWSAdaptive   = "aws-adaptive"   // full jitter, the AWS SDK's adaptive mode, per client
	ClientLimiter = "client-limiter" // full jitter, a retry.Limiter per client
	SharedLimiter = "shared-limiter" // full jitter, one retry.Limiter shared by all
	SharedCUBIC   = "shared-cubic"   // full jitter, the AWS adaptive mode's CUBIC bucket shared by all
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
		{Name: NoBackoff, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}},
		{Name: Exponential, Backoff: exp(backoff.NoJitter)},
		{Name: EqualJitter, Backoff: exp(backoff.EqualJitter)},
		{Name: FullJitter, Backoff: exp(backoff.FullJitter)},
		{Name: Decorrelated, Backoff: backoff.Policy{Kind: backoff.Exponential, Base: base, Max: max, Jitter: backoff.DecorrelatedJitter}},
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

// AWSStandardQuota is the retry quota of the AWS SDKs' standard retry mode:
// 500 tokens, 5 per retry, 1 back per success.
func AWSStandardQuota() retry.QuotaConfig {
	return retry.QuotaConfig{Capacity: 500, RetryCost: 5, SuccessRefill: 1}
}

// LimitStrategies returns the strategies that hold clients back beyond
// their backoff, each on full jitter from base, capped at max:
//
//   - full+quota: one retry quota shared by all clients, the AWS standard
//     mode's (AWSStandardQuota); a retry it refuses ends the request;
//   - aws-adaptive: a model of the AWS SDK's adaptive retry mode per
//     client (its CUBIC token bucket and its own standard quota);
//   - client-limiter: a retry.Limiter per client, with clientLimiter;
//   - shared-limiter: one retry.Limiter for all clients, with
//     SharedLimiterConfig, as retryd shares one per host;
//   - shared-cubic: the adaptive mode's CUBIC bucket shared by all
//     clients, without its quota: CUBIC set against the Limiter's AIMD.
func LimitStrategies(base, max time.Duration) []Strategy {
	full := backoff.Policy{Kind: backoff.Exponential, Base: base, Multiplier: 2, Max: max, Jitter: backoff.FullJitter}
	quota, client, shared := AWSStandardQuota(), ClientLimiterConfig(), SharedLimiterConfig()
	return []Strategy{
		{Name: FullQuota, Backoff: full, Quota: &quota},
		{Name: AWSAdaptive, Backoff: full, AWSAdaptive: true},
		{Name: ClientLimiter, Backoff: full, Limiter: &client},
		{Name: SharedLimiter, Backoff: full, Limiter: &shared, SharedLimiter: true},
		{Name: SharedCUBIC, Backoff: full, AWSAdaptive: true, SharedLimiter: true},
	}
}

// ClientLimiterConfig is the limiter of each client of client-limiter: the
// defaults.
func ClientLimiterConfig() retry.LimiterConfig { return retry.LimiterConfig{} }

// SharedLimiterConfig is the limiter of shared-limiter, set as retryd
// sets one per host: a floor of 10 attempts/s, a climb of 100 attempts/s
// per second (a tenth of what the server takes: the overshoot allowed), a
// probe every half second on average while the circuit is open (one
// request, for all the clients behind it).
func SharedLimiterConfig() retry.LimiterConfig {
	return retry.LimiterConfig{Floor: 10, Increase: 100, OpenFor: 500 * time.Millisecond}
}
