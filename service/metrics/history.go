package metrics

import (
	"math"
	"sync"
	"time"
)

// The console's charts cover the last hour in steps of ten seconds.
const (
	HistoryStep    = 10 * time.Second
	HistoryWindow  = time.Hour
	historyBuckets = int(HistoryWindow / HistoryStep)
)

// maxHistoryTenants bounds the tenants whose history is kept. Tenants come
// from the tokens file, so a deployment has a handful; the bound only keeps
// a mistake from growing memory without end (each tenant costs ~120 KiB).
const maxHistoryTenants = 256

// Lag is kept per step as a histogram of log-spaced bins, lagBase growth
// per bin from lagMin: 80 bins reach ~93 minutes, each quantile read back
// within 12 % of the truth, enough for a chart.
const (
	lagBins = 80
	lagMin  = 100 * time.Microsecond
	lagBase = 1.25
)

// Sample is one step of a tenant's recent activity: the attempts whose ends
// were recorded in [At, At+HistoryStep), by outcome, and the dispatch lag
// of the attempts started in it.
type Sample struct {
	At                                     time.Time
	Succeeded, Retrying, Exhausted, Failed int64
	LagP50, LagP99                         time.Duration // 0 when Lagged is 0
	Lagged                                 int64         // attempts whose lag was measured
}

// history keeps each tenant's last hour. One mutex guards it: it is taken
// once per attempt, far less often than the store is written.
type history struct {
	mu      sync.Mutex
	tenants map[string]*ring
}

type ring [historyBuckets]step

type step struct {
	start    int64 // the step's start in Unix seconds; a slot of an older start is empty
	outcomes [len(attemptOutcomes)]int64
	lag      [lagBins]uint32
	lagged   int64
}

// slot returns the step of tenant holding t, emptied if it held an older
// one, or nil past maxHistoryTenants. h.mu is held.
func (h *history) slot(tenant string, t time.Time) *step {
	r := h.tenants[tenant]
	if r == nil {
		if len(h.tenants) >= maxHistoryTenants {
			return nil
		}
		if h.tenants == nil {
			h.tenants = make(map[string]*ring)
		}
		r = new(ring)
		h.tenants[tenant] = r
	}
	start := t.Unix() - t.Unix()%int64(HistoryStep/time.Second)
	s := &r[(start/int64(HistoryStep/time.Second))%int64(historyBuckets)]
	switch {
	case s.start > start:
		return nil // an event older than the window: its slot holds a newer step
	case s.start < start:
		*s = step{start: start}
	}
	return s
}

func (h *history) outcome(tenant string, i int, at time.Time) {
	h.mu.Lock()
	if s := h.slot(tenant, at); s != nil {
		s.outcomes[i]++
	}
	h.mu.Unlock()
}

func (h *history) lag(tenant string, d time.Duration, at time.Time) {
	bin := 0
	if d > lagMin {
		bin = min(int(math.Log(float64(d)/float64(lagMin))/math.Log(lagBase))+1, lagBins-1)
	}
	h.mu.Lock()
	if s := h.slot(tenant, at); s != nil {
		s.lag[bin]++
		s.lagged++
	}
	h.mu.Unlock()
}

// recent returns tenant's steps of the last HistoryWindow up to now, oldest
// first, every step present (empty ones zero).
func (h *history) recent(tenant string, now time.Time) []Sample {
	sec := int64(HistoryStep / time.Second)
	last := now.Unix() - now.Unix()%sec
	out := make([]Sample, historyBuckets)
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.tenants[tenant]
	for i := range out {
		start := last - int64(historyBuckets-1-i)*sec
		out[i].At = time.Unix(start, 0)
		if r == nil {
			continue
		}
		s := &r[(start/sec)%int64(historyBuckets)]
		if s.start != start {
			continue
		}
		o := &out[i]
		o.Succeeded, o.Retrying, o.Exhausted, o.Failed = s.outcomes[0], s.outcomes[1], s.outcomes[2], s.outcomes[3]
		o.Lagged = s.lagged
		o.LagP50, o.LagP99 = s.quantile(0.5), s.quantile(0.99)
	}
	return out
}

// quantile reads q of the step's lag back from its bins, as the geometric
// middle of the bin it falls in.
func (s *step) quantile(q float64) time.Duration {
	if s.lagged == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(s.lagged)))
	var seen int64
	for bin, n := range s.lag {
		seen += int64(n)
		if seen >= rank {
			if bin == 0 {
				return lagMin / 2
			}
			lo := float64(lagMin) * math.Pow(lagBase, float64(bin-1))
			return time.Duration(lo * math.Sqrt(lagBase))
		}
	}
	return time.Duration(float64(lagMin) * math.Pow(lagBase, lagBins-1))
}
