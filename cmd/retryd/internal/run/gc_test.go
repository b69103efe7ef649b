package run

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, maxGCPercent},
		{1 << 20, maxGCPercent}, // 32 MiB of headroom would be 3,200 %
		{4 << 20, 800},          // 4 MiB live: 32 MiB more
		{16 << 20, 200},         // 16 MiB live: 32 MiB more
		{gcHeadroom, 100},       // from here on, Go's default
		{1 << 30, 100},          // never below it
		{gcHeadroom*100/maxGCPercent - 1, maxGCPercent},
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// gogc is the collector's percent now.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitGOGC collects until the percent is what ok accepts (a cleanup sets
// it soon after a collection, on a goroutine of the runtime's).
func waitGOGC(t *testing.T, want string, ok func(uint64) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if ok(gogc()) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("GOGC stayed %d, want %s", gogc(), want)
}

func above100(p uint64) bool { return p > 100 }
func is100(p uint64) bool    { return p == 100 }

// TestKeepGCHeadroom follows the live heap across collections: a small
// one gets more than the default percent, a large one the default, and
// stopping puts back what was there.
func TestKeepGCHeadroom(t *testing.T) {
	before := gogc()
	stop := keepGCHeadroom(func(string) string { return "" })
	defer stop()
	// This test's heap is far under 32 MiB.
	waitGOGC(t, "above 100", above100)

	big := make([]byte, 2*gcHeadroom)
	for i := range big {
		big[i] = byte(i) // touched, so that it is live memory
	}
	waitGOGC(t, "100 with 64 MiB live", is100)
	runtime.KeepAlive(big)
	big = nil
	waitGOGC(t, "above 100 again", above100)

	stop()
	if got := gogc(); got != before {
		t.Errorf("after stop GOGC = %d, want %d as before", got, before)
	}
	runtime.GC()
	runtime.GC()
	if got := gogc(); got != before {
		t.Errorf("after stop and two collections GOGC = %d: a cleanup still sets it", got)
	}
}

// TestKeepGCHeadroomLeavesGOGC: an operator's GOGC stands.
func TestKeepGCHeadroomLeavesGOGC(t *testing.T) {
	before := gogc()
	stop := keepGCHeadroom(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	defer stop()
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if got := gogc(); got != before {
		t.Errorf("GOGC = %d with GOGC set in the environment, want %d untouched", got, before)
	}
}
