package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		scanned uint64
		want    int
	}{
		{0, maxGCPercent},
		{1 << 20, maxGCPercent}, // 32 MiB of headroom would be 3,200 %
		{gcHeadroom * 100 / maxGCPercent, maxGCPercent},
		{gcHeadroom*100/maxGCPercent + 1, maxGCPercent - 1},
		{8 << 20, 400},    // 8 MiB scanned: 32 MiB more
		{16 << 20, 200},   // 16 MiB: 32 MiB more
		{gcHeadroom, 100}, // from here on, Go's default
		{gcHeadroom - 1, 100},
		{1 << 30, 100}, // never below it
	} {
		if got := gcPercent(c.scanned); got != c.want {
			t.Errorf("gcPercent(%d) = %d, want %d", c.scanned, got, c.want)
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

// noGOGC runs the test without GOGC in the environment (and with the
// runtime at its default), as retryd usually runs.
func noGOGC(t *testing.T) {
	t.Setenv("GOGC", "") // puts back what was there after the test
	os.Unsetenv("GOGC")
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })
}

// TestKeepGCHeadroom follows the live heap across collections: a small
// one gets more than the default percent, a large one the default, and
// stopping puts back what was there.
func TestKeepGCHeadroom(t *testing.T) {
	noGOGC(t)
	stop := keepGCHeadroom()
	defer stop()
	// This test's heap is far under 32 MiB; the percent was 100, so only
	// a cleanup after a collection can have raised it.
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
	if got := gogc(); got != 100 {
		t.Fatalf("after stop GOGC = %d, want 100 as before", got)
	}
	// A cleanup armed before stop runs after the next collection: it must
	// leave the percent alone.
	for range 5 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if got := gogc(); got != 100 {
			t.Fatalf("after stop and a collection GOGC = %d: a cleanup still sets it", got)
		}
	}
}

// TestKeepGCHeadroomLeavesGOGC: an operator's GOGC stands.
func TestKeepGCHeadroomLeavesGOGC(t *testing.T) {
	noGOGC(t)
	t.Setenv("GOGC", "50") // what the runtime read at start is not the point: keepGCHeadroom reads it
	stop := keepGCHeadroom()
	defer stop()
	for range 5 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if got := gogc(); got != 100 {
			t.Fatalf("GOGC = %d with GOGC set in the environment, want 100 untouched", got)
		}
	}
}
