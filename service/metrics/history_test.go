package metrics

import (
	"testing"
	"time"
)

func TestHistoryStepsAndQuantiles(t *testing.T) {
	var h history
	now := time.Unix(1_800_000_000, 0) // on a step boundary
	// 100 lags of 1..100 ms in the current step, for tenant a only.
	for i := 1; i <= 100; i++ {
		h.lag("a", time.Duration(i)*time.Millisecond, now)
	}
	h.outcome("a", 0, now)
	h.outcome("a", 1, now.Add(-HistoryStep))
	h.outcome("a", 2, now.Add(-HistoryWindow)) // out of the window by now
	h.outcome("b", 3, now)

	got := h.recent("a", now.Add(time.Second))
	if len(got) != historyBuckets {
		t.Fatalf("%d samples, want %d", len(got), historyBuckets)
	}
	last, prev := got[len(got)-1], got[len(got)-2]
	if !last.At.Equal(now) || !prev.At.Equal(now.Add(-HistoryStep)) {
		t.Fatalf("steps at %v, %v; want %v and one step before", prev.At, last.At, now)
	}
	if last.Succeeded != 1 || last.Failed != 0 || prev.Retrying != 1 || last.Lagged != 100 {
		t.Fatalf("last %+v prev %+v", last, prev)
	}
	for _, s := range got[:len(got)-2] {
		if s.Succeeded+s.Retrying+s.Exhausted+s.Failed != 0 {
			t.Fatalf("an hour-old or empty step has counts: %+v", s)
		}
	}
	within := func(name string, got, want time.Duration) {
		if float64(got) < 0.88*float64(want) || float64(got) > 1.12*float64(want) {
			t.Errorf("%s = %v, want %v within 12%%", name, got, want)
		}
	}
	within("p50", last.LagP50, 50*time.Millisecond)
	within("p99", last.LagP99, 99*time.Millisecond)

	// Another tenant's step holds only its own.
	if b := h.recent("b", now)[historyBuckets-1]; b.Failed != 1 || b.Succeeded != 0 || b.Lagged != 0 {
		t.Fatalf("tenant b: %+v", b)
	}
	// An hour on, the ring has forgotten everything.
	for _, s := range h.recent("a", now.Add(HistoryWindow+HistoryStep)) {
		if s.Succeeded+s.Retrying+s.Lagged != 0 {
			t.Fatalf("stale step reported an hour later: %+v", s)
		}
	}
}

func TestHistoryBoundsTenants(t *testing.T) {
	var h history
	now := time.Now()
	for i := range maxHistoryTenants + 10 {
		h.outcome(string(rune('a'+i%26))+string(rune(i)), 0, now)
	}
	if len(h.tenants) != maxHistoryTenants {
		t.Fatalf("%d tenants kept, want %d", len(h.tenants), maxHistoryTenants)
	}
}
