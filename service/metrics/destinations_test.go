package metrics_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/metrics"
)

// seriesOf returns the lines of a scrape of the metric name's series.
func seriesOf(scraped, name string) []string {
	var lines []string
	for _, l := range strings.Split(scraped, "\n") {
		if strings.HasPrefix(l, name+"{") {
			lines = append(lines, l)
		}
	}
	return lines
}

// wantSeries checks that got, the series of one metric, are exactly want.
func wantSeries(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !hasLine(got, w) {
			t.Errorf("scrape lacks %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

// TestDestinationMetrics: what the gate reports is scraped as held
// attempts by reason, attempts in flight, and one status at 1 of three.
func TestDestinationMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{})
	var r gate.Recorder = m
	r.DestinationStatus("acme", "orders", destination.Active)
	r.DestinationStatus("globex", "orders", destination.Active)
	r.DestinationHeld("acme", "orders", gate.HeldRate)
	r.DestinationHeld("acme", "orders", gate.HeldRate)
	r.DestinationHeld("acme", "orders", gate.HeldInFlight)
	r.DestinationInFlight("acme", "orders", 1)
	r.DestinationInFlight("acme", "orders", 1)
	r.DestinationInFlight("acme", "orders", 1)
	r.DestinationInFlight("acme", "orders", -1)
	r.DestinationInFlight("globex", "orders", 1)
	r.DestinationInFlight("globex", "orders", -1)
	r.DestinationStatus("acme", "orders", destination.Paused)
	r.DestinationHeld("acme", "orders", gate.HeldPaused)
	r.DestinationHeld("globex", "orders", gate.HeldToken)
	got := scrape(t, m.Handler())

	wantSeries(t, seriesOf(got, "retry_destination_held_total"),
		`retry_destination_held_total{destination="orders",reason="rate limit",tenant="acme"} 2`,
		`retry_destination_held_total{destination="orders",reason="in flight",tenant="acme"} 1`,
		`retry_destination_held_total{destination="orders",reason="paused",tenant="acme"} 1`,
		`retry_destination_held_total{destination="orders",reason="token refreshed",tenant="globex"} 1`,
	)
	wantSeries(t, seriesOf(got, "retry_destination_in_flight"),
		`retry_destination_in_flight{destination="orders",tenant="acme"} 2`,
		`retry_destination_in_flight{destination="orders",tenant="globex"} 0`,
	)
	wantSeries(t, seriesOf(got, "retry_destination_status"),
		`retry_destination_status{destination="orders",status="ACTIVE",tenant="acme"} 0`,
		`retry_destination_status{destination="orders",status="PAUSED",tenant="acme"} 1`,
		`retry_destination_status{destination="orders",status="DISABLED",tenant="acme"} 0`,
		`retry_destination_status{destination="orders",status="ACTIVE",tenant="globex"} 1`,
		`retry_destination_status{destination="orders",status="PAUSED",tenant="globex"} 0`,
		`retry_destination_status{destination="orders",status="DISABLED",tenant="globex"} 0`,
	)
	for _, want := range []string{
		"# TYPE retry_destination_held_total counter",
		"# TYPE retry_destination_in_flight gauge",
		"# TYPE retry_destination_status gauge",
		"# HELP retry_destination_held_total Attempts the destination gate held back",
		"# HELP retry_destination_in_flight Attempts this instance has in flight",
		"# HELP retry_destination_status A destination's status as this instance last read it",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}

	// Disabled, then a status retryd does not know: never two at 1.
	r.DestinationStatus("acme", "orders", destination.Disabled)
	r.DestinationStatus("globex", "orders", "SOMETHING")
	wantSeries(t, seriesOf(scrape(t, m.Handler()), "retry_destination_status"),
		`retry_destination_status{destination="orders",status="ACTIVE",tenant="acme"} 0`,
		`retry_destination_status{destination="orders",status="PAUSED",tenant="acme"} 0`,
		`retry_destination_status{destination="orders",status="DISABLED",tenant="acme"} 1`,
		`retry_destination_status{destination="orders",status="ACTIVE",tenant="globex"} 0`,
		`retry_destination_status{destination="orders",status="PAUSED",tenant="globex"} 0`,
		`retry_destination_status{destination="orders",status="DISABLED",tenant="globex"} 0`,
	)
}

// TestDestinationLabelsAreBounded: past the limit per tenant, a tenant's
// new destinations are counted under its OtherDestination; past the limit
// for all, every tenant's are; a destination labelled keeps its label; a
// destination named "other" is not the overflow; the overflow's statuses
// count destinations, and nothing is lost from the sums by tenant.
func TestDestinationLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{Destinations: 5, DestinationsPerTenant: 3})
	// Tenant a reads 40 destinations: 3 labelled, 37 under ~other, of
	// which 30 are paused.
	for i := range 40 {
		st := destination.Active
		if i >= 10 {
			st = destination.Paused
		}
		m.DestinationStatus("a", fmt.Sprintf("d%d", i), st)
	}
	for i := range 40 {
		m.DestinationHeld("a", fmt.Sprintf("d%d", i), gate.HeldRate)
		m.DestinationInFlight("a", fmt.Sprintf("d%d", i), 1)
	}
	// A labelled destination keeps its label; one beyond moves between
	// the overflow's statuses; one freeing its slot leaves the sum.
	m.DestinationHeld("a", "d0", gate.HeldRate)
	m.DestinationStatus("a", "d39", destination.Active)
	m.DestinationStatus("a", "d38", destination.Disabled)
	m.DestinationStatus("a", "d37", destination.Paused) // unchanged
	m.DestinationInFlight("a", "d39", -1)
	// Tenant b still gets labels (2 left of the 5), one of them "other";
	// tenant c none.
	for _, id := range []string{"other", "y", "z"} {
		m.DestinationStatus("b", id, destination.Active)
	}
	m.DestinationHeld("c", "x", gate.HeldPaused)

	got := scrape(t, m.Handler())
	wantSeries(t, seriesOf(got, "retry_destination_held_total"),
		`retry_destination_held_total{destination="d0",reason="rate limit",tenant="a"} 2`,
		`retry_destination_held_total{destination="d1",reason="rate limit",tenant="a"} 1`,
		`retry_destination_held_total{destination="d2",reason="rate limit",tenant="a"} 1`,
		`retry_destination_held_total{destination="~other",reason="rate limit",tenant="a"} 37`,
		`retry_destination_held_total{destination="~other",reason="paused",tenant="c"} 1`,
	)
	wantSeries(t, seriesOf(got, "retry_destination_in_flight"),
		`retry_destination_in_flight{destination="d0",tenant="a"} 1`,
		`retry_destination_in_flight{destination="d1",tenant="a"} 1`,
		`retry_destination_in_flight{destination="d2",tenant="a"} 1`,
		`retry_destination_in_flight{destination="~other",tenant="a"} 36`,
	)
	wantSeries(t, seriesOf(got, "retry_destination_status"),
		`retry_destination_status{destination="d0",status="ACTIVE",tenant="a"} 1`,
		`retry_destination_status{destination="d0",status="PAUSED",tenant="a"} 0`,
		`retry_destination_status{destination="d0",status="DISABLED",tenant="a"} 0`,
		`retry_destination_status{destination="d1",status="ACTIVE",tenant="a"} 1`,
		`retry_destination_status{destination="d1",status="PAUSED",tenant="a"} 0`,
		`retry_destination_status{destination="d1",status="DISABLED",tenant="a"} 0`,
		`retry_destination_status{destination="d2",status="ACTIVE",tenant="a"} 1`,
		`retry_destination_status{destination="d2",status="PAUSED",tenant="a"} 0`,
		`retry_destination_status{destination="d2",status="DISABLED",tenant="a"} 0`,
		// d3…d9 active, d10…d39 paused, then d39 active and d38 disabled.
		`retry_destination_status{destination="~other",status="ACTIVE",tenant="a"} 8`,
		`retry_destination_status{destination="~other",status="PAUSED",tenant="a"} 28`,
		`retry_destination_status{destination="~other",status="DISABLED",tenant="a"} 1`,
		`retry_destination_status{destination="other",status="ACTIVE",tenant="b"} 1`,
		`retry_destination_status{destination="other",status="PAUSED",tenant="b"} 0`,
		`retry_destination_status{destination="other",status="DISABLED",tenant="b"} 0`,
		`retry_destination_status{destination="y",status="ACTIVE",tenant="b"} 1`,
		`retry_destination_status{destination="y",status="PAUSED",tenant="b"} 0`,
		`retry_destination_status{destination="y",status="DISABLED",tenant="b"} 0`,
		`retry_destination_status{destination="~other",status="ACTIVE",tenant="b"} 1`,
		`retry_destination_status{destination="~other",status="PAUSED",tenant="b"} 0`,
		`retry_destination_status{destination="~other",status="DISABLED",tenant="b"} 0`,
	)
	// The policy labels are bounded apart: destinations took none.
	if n := len(attemptSeries(got)); n != 0 {
		t.Errorf("%d retry_attempts_total series", n)
	}
}

// TestDefaultDestinationLimitPerTenant: with the default limits, the
// destination after the 100th of a tenant is counted under ~other, and the
// series stay bounded however many more destinations come.
func TestDefaultDestinationLimitPerTenant(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{})
	const n = metrics.DefaultMaxDestinationsPerTenant
	for i := range 5 * n {
		m.DestinationHeld("a", fmt.Sprintf("d%d", i), gate.HeldDisabled)
	}
	got := seriesOf(scrape(t, m.Handler()), "retry_destination_held_total")
	if len(got) != n+1 {
		t.Errorf("%d series, want %d", len(got), n+1)
	}
	for _, want := range []string{
		fmt.Sprintf(`retry_destination_held_total{destination="d%d",reason="disabled",tenant="a"} 1`, n-1),
		fmt.Sprintf(`retry_destination_held_total{destination="~other",reason="disabled",tenant="a"} %d`, 4*n),
	} {
		if !hasLine(got, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// TestDestinationReportsConcurrently: the gate reports from many
// goroutines at once; slots taken and freed in pairs leave nothing in
// flight, and a destination ends with exactly one status at 1.
func TestDestinationReportsConcurrently(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{Destinations: 2})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("d%d", i%4)
				m.DestinationInFlight("t", id, 1)
				m.DestinationHeld("t", id, gate.HeldInFlight)
				m.DestinationStatus("t", id, destinationStatus(w+i))
				m.DestinationInFlight("t", id, -1)
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		m.DestinationStatus("t", fmt.Sprintf("d%d", i), destination.Paused)
	}
	got := scrape(t, m.Handler())
	wantSeries(t, seriesOf(got, "retry_destination_in_flight"),
		`retry_destination_in_flight{destination="d0",tenant="t"} 0`,
		`retry_destination_in_flight{destination="d1",tenant="t"} 0`,
		`retry_destination_in_flight{destination="~other",tenant="t"} 0`,
	)
	wantSeries(t, seriesOf(got, "retry_destination_held_total"),
		`retry_destination_held_total{destination="d0",reason="in flight",tenant="t"} 400`,
		`retry_destination_held_total{destination="d1",reason="in flight",tenant="t"} 400`,
		`retry_destination_held_total{destination="~other",reason="in flight",tenant="t"} 800`,
	)
	wantSeries(t, seriesOf(got, "retry_destination_status"),
		`retry_destination_status{destination="d0",status="ACTIVE",tenant="t"} 0`,
		`retry_destination_status{destination="d0",status="PAUSED",tenant="t"} 1`,
		`retry_destination_status{destination="d0",status="DISABLED",tenant="t"} 0`,
		`retry_destination_status{destination="d1",status="ACTIVE",tenant="t"} 0`,
		`retry_destination_status{destination="d1",status="PAUSED",tenant="t"} 1`,
		`retry_destination_status{destination="d1",status="DISABLED",tenant="t"} 0`,
		`retry_destination_status{destination="~other",status="ACTIVE",tenant="t"} 0`,
		`retry_destination_status{destination="~other",status="PAUSED",tenant="t"} 2`,
		`retry_destination_status{destination="~other",status="DISABLED",tenant="t"} 0`,
	)
}

func destinationStatus(i int) destination.Status {
	return [...]destination.Status{destination.Active, destination.Paused, destination.Disabled}[i%3]
}
