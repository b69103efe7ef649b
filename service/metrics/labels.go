package metrics

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Limits.
const (
	DefaultMaxPolicies              = 1000
	DefaultMaxPoliciesPerTenant     = 100
	DefaultMaxDestinations          = 1000
	DefaultMaxDestinationsPerTenant = 100
)

// OtherPolicy is the policy label under which retry_attempts_total counts
// the attempts of a tenant's policies beyond Limits. No policy ID can be
// it (an ID is letters, digits, '.', '_' and '-'), so it never stands for
// a real policy.
const OtherPolicy = "~other"

// Limits bound the series of the collectors whose labels tenants choose:
// without a bound, a tenant registering policy after policy, or
// destination after destination, would make series without end.
//
// Policies and PoliciesPerTenant bound the policy label of
// retry_attempts_total. A (tenant, policy) pair gets a policy label of its
// own when its first attempt is counted, if its tenant has fewer than
// PoliciesPerTenant such pairs and all tenants together fewer than
// Policies; otherwise its attempts are counted under its tenant's
// OtherPolicy. A pair keeps what it got for the life of the process. So
// one tenant can take at most PoliciesPerTenant of the Policies labels,
// never all of them, and counts summed by tenant stay exact whatever
// overflows. The series of retry_attempts_total number at most 5 (one per
// outcome) times Policies plus the number of tenants (each tenant's
// OtherPolicy); a tenant is an entry of retryd's tokens file, which the
// operator writes.
//
// Destinations and DestinationsPerTenant bound the destination label of
// retry_destination_held_total, retry_destination_in_flight and
// retry_destination_status in the same way: a (tenant, destination) pair
// gets a label of its own when the gate first reports it, if its tenant
// has fewer than DestinationsPerTenant such pairs and all tenants together
// fewer than Destinations, and is otherwise counted under its tenant's
// OtherDestination, for the life of the process (see
// Metrics.DestinationHeld). Those collectors have at most 6 (one per hold
// reason), 1 and 3 (one per status) series each per labelled pair, and as
// many per tenant for its OtherDestination.
type Limits struct {
	Policies          int // pairs labelled, all tenants together; 0 or less means DefaultMaxPolicies
	PoliciesPerTenant int // pairs labelled per tenant; 0 or less means DefaultMaxPoliciesPerTenant

	Destinations          int // (tenant, destination) pairs labelled, all tenants together; 0 or less means DefaultMaxDestinations
	DestinationsPerTenant int // such pairs labelled per tenant; 0 or less means DefaultMaxDestinationsPerTenant
}

// withDefaults returns l with its unset fields at their defaults.
func (l Limits) withDefaults() Limits {
	if l.Policies <= 0 {
		l.Policies = DefaultMaxPolicies
	}
	if l.PoliciesPerTenant <= 0 {
		l.PoliciesPerTenant = DefaultMaxPoliciesPerTenant
	}
	if l.Destinations <= 0 {
		l.Destinations = DefaultMaxDestinations
	}
	if l.DestinationsPerTenant <= 0 {
		l.DestinationsPerTenant = DefaultMaxDestinationsPerTenant
	}
	return l
}

// attempts holds retry_attempts_total and the counters of its series, by
// tenant and policy, made on first use.
type attempts struct {
	vec *prometheus.CounterVec
	lim Limits
	log *slog.Logger

	mu       sync.Mutex
	labelled int // pairs with a policy label of their own, all tenants together
	tenants  map[string]*tenantSeries
}

// tenantSeries is one tenant's series.
type tenantSeries struct {
	policies map[string]*outcomeCounters // the pairs with a label of their own
	other    outcomeCounters             // OtherPolicy's
	warned   bool                        // the log has said this tenant overflowed
}

// outcomeCounters are one policy label's counters, by index in outcomes;
// nil until first counted, so that an outcome never seen shows no series.
type outcomeCounters [len(outcomes)]prometheus.Counter

// outcomes are retry_attempts_total's outcome labels: attemptOutcomes',
// then lease_lost.
var outcomes = [...]string{OutcomeSucceeded, OutcomeRetry, OutcomeExhausted, OutcomeFailed, OutcomeLeaseLost}

const leaseLostIndex = len(outcomes) - 1

func newAttempts(lim Limits, log *slog.Logger) *attempts {
	return &attempts{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retry_attempts_total",
			Help: "Attempts made, by outcome (the task's state after the attempt), tenant and policy " +
				"(policy \"" + OtherPolicy + "\": the tenant's policies beyond the limits on labels).",
		}, []string{"outcome", "policy", "tenant"}),
		lim:     lim.withDefaults(),
		log:     log,
		tenants: map[string]*tenantSeries{},
	}
}

// inc counts one attempt of tenant's policy with outcomes[outcome].
func (a *attempts) inc(tenant, policy string, outcome int) {
	a.mu.Lock()
	c := a.counter(tenant, policy, outcome)
	a.mu.Unlock()
	c.Inc()
}

// counter returns the counter of (tenant, policy, outcomes[o]), labelling
// the pair if the limits allow. a.mu is held.
func (a *attempts) counter(tenant, policy string, o int) prometheus.Counter {
	t := a.tenants[tenant]
	if t == nil {
		t = &tenantSeries{policies: map[string]*outcomeCounters{}}
		a.tenants[tenant] = t
	}
	cs, label := t.policies[policy], policy
	if cs == nil {
		if len(t.policies) < a.lim.PoliciesPerTenant && a.labelled < a.lim.Policies {
			cs = new(outcomeCounters)
			t.policies[policy] = cs
			a.labelled++
		} else {
			cs, label = &t.other, OtherPolicy
			if !t.warned {
				t.warned = true
				a.log.Warn("metrics: a tenant's further policies are counted under policy="+OtherPolicy,
					"tenant", tenant, "tenant_policies", len(t.policies), "max_per_tenant", a.lim.PoliciesPerTenant,
					"policies", a.labelled, "max", a.lim.Policies)
			}
		}
	}
	if cs[o] == nil {
		cs[o] = a.vec.WithLabelValues(outcomes[o], label, tenant)
	}
	return cs[o]
}
