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

	mu     sync.Mutex
	labels *labelRule[outcomeCounters]
}

// labelRule is the rule of Limits for one label whose values tenants
// choose (a policy, a destination): a (tenant, name) pair gets a label of
// its own when first seen, if its tenant has fewer than perTenant such
// pairs and all tenants together fewer than total, and is otherwise
// counted under its tenant's overflow label, for the life of the process.
// S is the series of one label. Its owner's lock guards it.
type labelRule[S any] struct {
	what, whats, other string // the label's name, its plural (for the log), and the overflow value
	total, perTenant   int
	log                *slog.Logger
	labelled           int // pairs with a label of their own, all tenants together
	tenants            map[string]*tenantLabels[S]
}

// tenantLabels is one tenant's series under a labelRule.
type tenantLabels[S any] struct {
	named  map[string]*S // the pairs with a label of their own
	other  S             // the overflow label's
	warned bool          // the log has said this tenant overflowed
}

func newLabelRule[S any](what, whats, other string, total, perTenant int, log *slog.Logger) *labelRule[S] {
	return &labelRule[S]{what: what, whats: whats, other: other, total: total, perTenant: perTenant, log: log,
		tenants: map[string]*tenantLabels[S]{}}
}

// series returns the series of (tenant, name), labelling the pair if the
// limits allow, and its label; overflow reports that it is the tenant's
// overflow label's.
func (l *labelRule[S]) series(tenant, name string) (s *S, label string, overflow bool) {
	t := l.tenants[tenant]
	if t == nil {
		t = &tenantLabels[S]{named: map[string]*S{}}
		l.tenants[tenant] = t
	}
	if s := t.named[name]; s != nil {
		return s, name, false
	}
	if len(t.named) < l.perTenant && l.labelled < l.total {
		s := new(S)
		t.named[name] = s
		l.labelled++
		return s, name, false
	}
	if !t.warned {
		t.warned = true
		l.log.Warn("metrics: a tenant's further "+l.whats+" are counted under "+l.what+"="+l.other,
			"tenant", tenant, "tenant_"+l.whats, len(t.named), "max_per_tenant", l.perTenant,
			l.whats, l.labelled, "max", l.total)
	}
	return &t.other, l.other, true
}

// outcomeCounters are one policy label's counters, by index in outcomes;
// nil until first counted, so that an outcome never seen shows no series.
type outcomeCounters [len(outcomes)]prometheus.Counter

// outcomes are retry_attempts_total's outcome labels: attemptOutcomes',
// then lease_lost.
var outcomes = [...]string{OutcomeSucceeded, OutcomeRetry, OutcomeExhausted, OutcomeFailed, OutcomeLeaseLost}

const leaseLostIndex = len(outcomes) - 1

func newAttempts(lim Limits, log *slog.Logger) *attempts {
	lim = lim.withDefaults()
	return &attempts{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retry_attempts_total",
			Help: "Attempts made, by outcome (the task's state after the attempt), tenant and policy " +
				"(policy \"" + OtherPolicy + "\": the tenant's policies beyond the limits on labels).",
		}, []string{"outcome", "policy", "tenant"}),
		labels: newLabelRule[outcomeCounters]("policy", "policies", OtherPolicy, lim.Policies, lim.PoliciesPerTenant, log),
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
	cs, label, _ := a.labels.series(tenant, policy)
	if cs[o] == nil {
		cs[o] = a.vec.WithLabelValues(outcomes[o], label, tenant)
	}
	return cs[o]
}
