package limitstest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Bench measures LimitAcquire and then LimitRelease of its slot, under a
// rate and a cap that grant nearly every call: from one goroutine on one
// key, and from several on one key and on many. It reports the calls
// refused per operation beside the time; it asserts nothing.
func Bench(b *testing.B, l store.Limits) {
	for _, c := range []struct {
		name     string
		parallel bool
		keys     int
	}{{"serial", false, 1}, {"parallel,keys=1", true, 1}, {"parallel,keys=64", true, 64}} {
		// Simulated time moves on one token per call, and on from one
		// round of the benchmark to the next, which use the same keys.
		var tick atomic.Int64
		b.Run(c.name, func(b *testing.B) {
			var refused atomic.Int64
			key := b.Name()
			call := func(ctx context.Context, i int) {
				p := store.LimitParams{Key: key + "/" + strconv.Itoa(i%c.keys), PerSecond: 100_000, Burst: 1000,
					MaxInFlight: 1000, Hold: time.Minute, Now: start().Add(time.Duration(tick.Add(1)) * 10 * time.Microsecond)}
				g, err := l.LimitAcquire(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				if !g.OK {
					refused.Add(1)
					return
				}
				if err := l.LimitRelease(ctx, p.Key, g.Slot); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			if !c.parallel {
				for i := 0; b.Loop(); i++ {
					call(ctx, i)
				}
			} else {
				var seq atomic.Int64
				b.SetParallelism(4) // the stores wait on the network: more callers than cores
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						call(ctx, int(seq.Add(1)))
					}
				})
			}
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
		})
	}
}
