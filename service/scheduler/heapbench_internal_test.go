package scheduler

import (
	"runtime"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// BenchmarkHeapBytes files a million tasks due over the next hour, as
// retryd's heap holds them after a million creates or a restart's rebuild,
// and reports the memory the heap keeps per task (B/entry: the Go heap in
// use after a collection, less that before) and the time each set takes.
// The IDs are fresh strings, as a store's rows or an API call give them,
// so an ID the heap keeps counts and one it packs does not.
func BenchmarkHeapBytes(b *testing.B) {
	const n = 1_000_000
	t0 := time.Now().Add(2 * time.Minute)
	var perEntry float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := newDueHeap()
		for i := range n {
			h.set(store.Due{ID: store.NewID(), At: t0.Add(time.Duration(i) * time.Hour / n), Version: 1})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / n
		runtime.KeepAlive(h)
	}
	b.ReportMetric(perEntry, "B/entry")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/set")
}
