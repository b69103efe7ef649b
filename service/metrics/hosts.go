package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxHostLabels is how many target hosts retry_held_total labels on its
// own; the tasks held from further hosts are counted under OtherHost.
// Hosts are whatever tasks name, so without a bound a client creating
// tasks for ever new hosts would make series without end.
const MaxHostLabels = 100

// OtherHost is the host label of retry_held_total beyond MaxHostLabels.
// No target host (see hostlimit.Key: "scheme://host") can be it.
const OtherHost = "~other"

// Reasons of retry_held_total.
const (
	HeldLimited     = "limited"      // the host's limiter's rate has no room
	HeldCircuitOpen = "circuit_open" // the host's circuit is open
)

// held holds retry_held_total and its series, by host, made on first use:
// the first MaxHostLabels hosts keep their labels for the life of the
// process, later ones share OtherHost's.
type held struct {
	vec   *prometheus.CounterVec
	mu    sync.Mutex
	hosts map[string]*heldCounters // at most MaxHostLabels
	other *heldCounters            // OtherHost's, nil until needed
}

// heldCounters are one host label's counters: limited, circuit_open.
type heldCounters [2]prometheus.Counter

func newHeld() *held {
	return &held{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retry_held_total",
			Help: "Tasks held back, unsent and uncharged, by their target host's adaptive limiter, by host (\"" +
				OtherHost + "\" beyond the first " + strconv.Itoa(MaxHostLabels) + ") and reason (" +
				HeldLimited + ", " + HeldCircuitOpen + ").",
		}, []string{"host", "reason"}),
		hosts: map[string]*heldCounters{},
	}
}

func (h *held) counters(label string) *heldCounters {
	return &heldCounters{h.vec.WithLabelValues(label, HeldLimited), h.vec.WithLabelValues(label, HeldCircuitOpen)}
}

// Held counts a task held back from host by its limiter: by its open
// circuit when circuitOpen, else by its rate. A nil m records nothing.
func (m *Metrics) Held(host string, circuitOpen bool) {
	if m == nil {
		return
	}
	h := m.held
	h.mu.Lock()
	cs := h.hosts[host]
	switch {
	case cs != nil:
	case len(h.hosts) < MaxHostLabels:
		cs = h.counters(host)
		h.hosts[host] = cs
	default:
		if h.other == nil {
			h.other = h.counters(OtherHost)
		}
		cs = h.other
	}
	h.mu.Unlock()
	i := 0
	if circuitOpen {
		i = 1
	}
	cs[i].Inc()
}
