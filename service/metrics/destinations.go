package metrics

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/gate"
)

// Metrics is told what the destination gate does (gate.Config.Recorder).
var _ gate.Recorder = (*Metrics)(nil)

// OtherDestination is the destination label under which the destination
// collectors count a tenant's destinations beyond Limits. No destination
// ID can be it (an ID is lower-case letters, digits, '.', '_' and '-': see
// destination.ValidID), so it never stands for a real destination, and a
// destination named "other" keeps a label of its own.
const OtherDestination = "~other"

// destinationStatuses are the status labels of retry_destination_status.
var destinationStatuses = [...]destination.Status{destination.Active, destination.Paused, destination.Disabled}

// destinations holds retry_destination_held_total,
// retry_destination_in_flight and retry_destination_status, and their
// series by tenant and destination, made on first use, labelled by the
// same rule as attempts' policies (labelRule).
type destinations struct {
	held     *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	status   *prometheus.GaugeVec

	mu     sync.Mutex
	labels *labelRule[destinationSeries]
	// otherStatus is, by tenant, the status last reported of each
	// destination counted under OtherDestination, by ID: its index in
	// destinationStatuses, or -1 for none of them. The overflow label's
	// status gauges count these, so an entry is kept for each such
	// destination the gate reports (as the gate keeps one itself).
	otherStatus map[string]map[string]int
}

// destinationSeries are one destination label's series, each nil until
// first used, so that what never happened shows no series.
type destinationSeries struct {
	held     map[string]prometheus.Counter // by reason
	inFlight prometheus.Gauge
	status   *[len(destinationStatuses)]prometheus.Gauge // all three, made together
}

func newDestinations(lim Limits, log *slog.Logger) *destinations {
	lim = lim.withDefaults()
	other := " (destination \"" + OtherDestination + "\": the tenant's destinations beyond the limits on labels"
	return &destinations{
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retry_destination_held_total",
			Help: "Attempts the destination gate held back, unsent and uncharged (for \"token refreshed\", " +
				"sent again at once with a fresh OAuth2 token), by tenant, destination" + other + ") and reason " +
				"(paused, disabled, rate limit, in flight, destination unavailable, token refreshed).",
		}, []string{"tenant", "destination", "reason"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retry_destination_in_flight",
			Help: "Attempts this instance has in flight to a destination with a maxInFlight limit, " +
				"by tenant and destination" + other + ", summed).",
		}, []string{"tenant", "destination"}),
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retry_destination_status",
			Help: "A destination's status as this instance last read it: 1 for its status (ACTIVE, PAUSED or " +
				"DISABLED), 0 for the others, by tenant, destination" + other + ": how many of them are in each status) and status.",
		}, []string{"tenant", "destination", "status"}),
		labels: newLabelRule[destinationSeries]("destination", "destinations", OtherDestination,
			lim.Destinations, lim.DestinationsPerTenant, log),
		otherStatus: map[string]map[string]int{},
	}
}

// DestinationHeld counts an attempt of tenant's task the destination gate
// held back from destination id, by reason (one of gate's Held…
// constants). The destination label is id, or OtherDestination beyond
// the Limits: a (tenant, destination) pair is labelled when any of
// DestinationHeld, DestinationInFlight and DestinationStatus first hears
// of it, if the limits allow, and keeps that for the life of the process.
func (m *Metrics) DestinationHeld(tenant, id, reason string) {
	if m == nil {
		return
	}
	d := m.dest
	d.mu.Lock()
	s, label, _ := d.labels.series(tenant, id)
	c := s.held[reason]
	if c == nil {
		if s.held == nil {
			s.held = map[string]prometheus.Counter{}
		}
		c = d.held.WithLabelValues(tenant, label, reason)
		s.held[reason] = c
	}
	d.mu.Unlock()
	c.Inc()
}

// DestinationInFlight adds delta to the attempts this instance has in
// flight to tenant's destination id: +1 when an attempt takes one of its
// in-flight slots, -1 when it frees it. Under OtherDestination, the
// tenant's destinations beyond the Limits are summed.
func (m *Metrics) DestinationInFlight(tenant, id string, delta int) {
	if m == nil {
		return
	}
	d := m.dest
	d.mu.Lock()
	s, label, _ := d.labels.series(tenant, id)
	if s.inFlight == nil {
		s.inFlight = d.inFlight.WithLabelValues(tenant, label)
	}
	g := s.inFlight
	d.mu.Unlock()
	g.Add(float64(delta))
}

// DestinationStatus records the status of tenant's destination id as this
// instance last read it: its retry_destination_status series are 1 for
// status and 0 for the other two (all 0 for a status that is none of
// ACTIVE, PAUSED and DISABLED). Under OtherDestination, each of the three
// counts the tenant's destinations beyond the Limits last read in that
// status, so that summed by tenant and status the series are exact, and
// `retry_destination_status{status="PAUSED"} > 0` finds every tenant with
// a paused destination, labelled or not.
func (m *Metrics) DestinationStatus(tenant, id string, status destination.Status) {
	if m == nil {
		return
	}
	i := -1
	for j, s := range destinationStatuses {
		if s == status {
			i = j
		}
	}
	d := m.dest
	d.mu.Lock()
	defer d.mu.Unlock() // the gauges move under the lock, so that two reports never leave two statuses at 1
	s, label, overflow := d.labels.series(tenant, id)
	if s.status == nil {
		s.status = new([len(destinationStatuses)]prometheus.Gauge)
		for j, st := range destinationStatuses {
			s.status[j] = d.status.WithLabelValues(tenant, label, string(st))
		}
	}
	if !overflow {
		for j, g := range s.status {
			if j == i {
				g.Set(1)
			} else {
				g.Set(0)
			}
		}
		return
	}
	last := d.otherStatus[tenant]
	if last == nil {
		last = map[string]int{}
		d.otherStatus[tenant] = last
	}
	if old, ok := last[id]; ok && old >= 0 {
		s.status[old].Dec()
	}
	if i >= 0 {
		s.status[i].Inc()
	}
	last[id] = i
}
