package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcHeadroom is how far retryd's heap may grow past what the last
// collection left live before the next one runs. retryd keeps little live
// (3–4 MiB while it creates and sends thousands of tasks a second), and
// Go's default (GOGC=100: collect once the heap has doubled, and at 4 MiB
// at the least) then collects dozens of times a second, each time scanning
// the stacks of every worker: a tenth of retryd's CPU in single creates.
// With the headroom it collects a few times a second; once the live heap
// is larger than the headroom (a million tasks due in memory), GOGC is
// 100, as by default, and memory is what it was.
const gcHeadroom = 32 << 20

// maxGCPercent bounds the percent keepGCHeadroom sets. Go collects at
// 4 MiB × GOGC/100 at the least, so at 800 an almost empty heap is
// collected at 32 MiB, the headroom, and no later.
const maxGCPercent = 800

// gcPercent is the GOGC under which the heap grows by gcHeadroom before
// the next collection, given what the collector scans: the live heap,
// the goroutines' stacks and the globals (the runtime's goal is the live
// heap plus GOGC percent of all three). Never less than Go's default.
func gcPercent(scanned uint64) int {
	if scanned == 0 {
		return maxGCPercent
	}
	return int(min(max(gcHeadroom*100/scanned, 100), maxGCPercent))
}

// keepGCHeadroom sets the collector's percent after every collection from
// what that collection found (see gcHeadroom), unless the environment sets
// GOGC, which then stands as given; GOMEMLIMIT works as usual. It is for
// the process, once: the percent is the runtime's, not a caller's. It
// returns the function that stops it and puts back the percent it found.
func keepGCHeadroom() (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	// What gcPercent's argument is the sum of.
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	var mu sync.Mutex // stop and a cleanup's setting do not interleave
	stopped, set := false, -1
	adjust := func() {
		metrics.Read(samples)
		var scanned uint64
		for _, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				scanned += s.Value.Uint64()
			}
		}
		if p := gcPercent(scanned); p != set {
			debug.SetGCPercent(p)
			set = p
		}
	}
	var arm func()
	// A cleanup runs once the collector has found its object unreachable:
	// after each collection, then, for as long as each arms the next.
	arm = func() {
		runtime.AddCleanup(new(gcTick), func(struct{}) {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			adjust()
			arm()
		}, struct{}{})
	}
	was := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(was)
	arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped, set = true, -1 // the percent is the one found again
		debug.SetGCPercent(int(was[0].Value.Uint64()))
	}
}

// gcTick is the object whose cleanup marks a collection. It holds a
// pointer so that the allocator gives it a block of its own: cleanups of
// tiny pointer-free objects may never run.
type gcTick struct{ _ *int }
