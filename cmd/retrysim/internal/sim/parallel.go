package sim

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// parallel calls job(i) for every i in [0, n) on up to workers goroutines
// (0 means GOMAXPROCS) and returns ctx's error if it ended the work early.
// Each job writes only its own result slot, so the outcome does not depend
// on the schedule.
func parallel(ctx context.Context, n, workers int, job func(i int)) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				job(i)
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}
