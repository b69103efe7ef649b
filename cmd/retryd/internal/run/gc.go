package run

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcHeadroom is how far retryd's heap may grow past what the last
// collection left live before the next one runs, at least. retryd keeps
// little live (a few MiB while it creates and sends thousands of tasks a
// second), and Go's default (GOGC=100: collect when the heap has doubled,
// and at 4 MiB at the least) then collects dozens of times a second, each
// time scanning the stacks of every worker: about a tenth of its CPU in
// single creates. With this headroom it collects a few times a second, for
// at most 32 MiB more memory; once the live heap exceeds it (a million
// tasks due in memory), GOGC is 100 as by default.
const gcHeadroom = 32 << 20

// maxGCPercent bounds the percent keepGCHeadroom sets, so that a heap
// that is almost empty is not given its headroom many times over.
const maxGCPercent = 1000

// gcPercent is the GOGC that lets a heap of live bytes grow by gcHeadroom
// before the next collection, and never less than Go's default of 100.
func gcPercent(live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	p := gcHeadroom * 100 / live
	return int(min(max(p, 100), maxGCPercent))
}

// keepGCHeadroom sets the collector's percent from the live heap after
// every collection (see gcHeadroom), unless the environment sets GOGC,
// which then stands as given. It returns the function that stops it and
// puts back the percent it found.
func keepGCHeadroom(getenv func(string) string) (stop func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	var mu sync.Mutex // stop and a cleanup's setting do not interleave
	stopped := false
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	// A cleanup runs once the collector has found its object unreachable:
	// after each collection, then, for as long as it arms the next one.
	arm = func() {
		runtime.AddCleanup(new(gcTick), func(struct{}) {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				debug.SetGCPercent(gcPercent(sample[0].Value.Uint64()))
			}
			arm()
		}, struct{}{})
	}
	was := debug.SetGCPercent(maxGCPercent)
	arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		debug.SetGCPercent(was)
	}
}

// gcTick is the object whose cleanup marks a collection. It holds a
// pointer so that the allocator gives it a block of its own: cleanups of
// tiny pointer-free objects may never run.
type gcTick struct{ _ *int }
