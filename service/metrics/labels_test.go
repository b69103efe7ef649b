package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/metrics"
)

// attemptSeries returns the retry_attempts_total lines of a scrape.
func attemptSeries(scraped string) []string {
	var lines []string
	for _, l := range strings.Split(scraped, "\n") {
		if strings.HasPrefix(l, "retry_attempts_total{") {
			lines = append(lines, l)
		}
	}
	return lines
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestTenantsAreCountedApart: two tenants' policies of one ID are two
// series, never one.
func TestTenantsAreCountedApart(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{})
	ctx := context.Background()
	m.ObserveTenant(ctx, "acme", retry.Event{Outcome: retry.Succeeded, Name: "orders"})
	m.ObserveTenant(ctx, "acme", retry.Event{Outcome: retry.Succeeded, Name: "orders"})
	m.ObserveTenant(ctx, "globex", retry.Event{Outcome: retry.Succeeded, Name: "orders"})
	m.LeaseLost("globex", "orders")
	got := attemptSeries(scrape(t, m.Handler()))
	for _, want := range []string{
		`retry_attempts_total{outcome="succeeded",policy="orders",tenant="acme"} 2`,
		`retry_attempts_total{outcome="succeeded",policy="orders",tenant="globex"} 1`,
		`retry_attempts_total{outcome="lease_lost",policy="orders",tenant="globex"} 1`,
	} {
		if !hasLine(got, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if len(got) != 3 {
		t.Errorf("%d series, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestPolicyLabelsAreBounded: past the limit per tenant, a tenant's new
// policies are counted under its OtherPolicy; past the limit for all, every
// tenant's are; a tenant cannot take the labels of all for itself; a
// policy labelled keeps its label; nothing is lost from the counts.
func TestPolicyLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{Policies: 5, PoliciesPerTenant: 3})
	ctx := context.Background()
	// Tenant a makes 40 policies: 3 labelled, 37 under ~other.
	for i := range 40 {
		m.ObserveTenant(ctx, "a", retry.Event{Outcome: retry.Retrying, Name: fmt.Sprintf("p%d", i)})
	}
	// a's first policies keep their labels; a lost lease of one past the
	// limit counts under ~other too.
	m.ObserveTenant(ctx, "a", retry.Event{Outcome: retry.Retrying, Name: "p0"})
	m.LeaseLost("a", "p39")
	// Tenant b still gets labels (2 left of the 5), tenant c none.
	for _, p := range []string{"x", "y", "z"} {
		m.ObserveTenant(ctx, "b", retry.Event{Outcome: retry.Succeeded, Name: p})
	}
	m.ObserveTenant(ctx, "c", retry.Event{Outcome: retry.Succeeded, Name: "x"})

	got := attemptSeries(scrape(t, m.Handler()))
	for _, want := range []string{
		`retry_attempts_total{outcome="retry",policy="p0",tenant="a"} 2`,
		`retry_attempts_total{outcome="retry",policy="p1",tenant="a"} 1`,
		`retry_attempts_total{outcome="retry",policy="p2",tenant="a"} 1`,
		`retry_attempts_total{outcome="retry",policy="~other",tenant="a"} 37`,
		`retry_attempts_total{outcome="lease_lost",policy="~other",tenant="a"} 1`,
		`retry_attempts_total{outcome="succeeded",policy="x",tenant="b"} 1`,
		`retry_attempts_total{outcome="succeeded",policy="y",tenant="b"} 1`,
		`retry_attempts_total{outcome="succeeded",policy="~other",tenant="b"} 1`,
		`retry_attempts_total{outcome="succeeded",policy="~other",tenant="c"} 1`,
	} {
		if !hasLine(got, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d series, want 9:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestDefaultLimitPerTenant: with the default limits, the policy after the
// 100th of a tenant is counted under ~other, and the series stay bounded
// however many more policies come.
func TestDefaultLimitPerTenant(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{})
	ctx := context.Background()
	const n = metrics.DefaultMaxPoliciesPerTenant
	for i := range 5 * n {
		m.ObserveTenant(ctx, "a", retry.Event{Outcome: retry.Succeeded, Name: fmt.Sprintf("p%d", i)})
	}
	got := attemptSeries(scrape(t, m.Handler()))
	if len(got) != n+1 {
		t.Errorf("%d series, want %d", len(got), n+1)
	}
	for _, want := range []string{
		fmt.Sprintf(`retry_attempts_total{outcome="succeeded",policy="p%d",tenant="a"} 1`, n-1),
		fmt.Sprintf(`retry_attempts_total{outcome="succeeded",policy="~other",tenant="a"} %d`, 4*n),
	} {
		if !hasLine(got, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
