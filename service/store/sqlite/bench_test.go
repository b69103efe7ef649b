package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/storetest"
)

// BenchmarkClaimFinish claims a batch of due tasks and finishes them with
// one TaskFinish call, as a scheduler that batches both does: two durable
// transactions per batch. The "ids" runs name the tasks to claim, as a
// scheduler that keeps due tasks in memory does; "omit" ones also skip
// reading the requests, as it does when it kept them from the last claim.
func BenchmarkClaimFinish(b *testing.B) {
	for _, c := range []struct {
		batch     int
		ids, omit bool
	}{{1, false, false}, {64, false, false}, {256, false, false}, {64, true, false}, {256, true, false}, {64, true, true}} {
		name := fmt.Sprint("batch=", c.batch)
		if c.ids {
			name += ",ids"
		}
		if c.omit {
			name += ",omit"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := open(b)
			defer s.Close()
			queue := storetest.Seed(b, s, max(4*c.batch, 1024), 32, 1)
			ctx := context.Background()
			now := storetest.BenchStart
			done := 0
			m := storetest.StartMeter(b)
			for done < b.N {
				now = now.Add(time.Millisecond)
				p := store.ClaimParams{Now: now, Lease: time.Minute, Limit: min(c.batch, b.N-done), OmitRequest: c.omit}
				if c.ids {
					p.IDs, queue = queue[:p.Limit], append(queue[p.Limit:], queue[:p.Limit]...)
				}
				claimed, err := s.TaskClaim(ctx, p)
				if err != nil || len(claimed) != p.Limit {
					b.Fatalf("TaskClaim = %d tasks, %v; want %d", len(claimed), err, p.Limit)
				}
				fs := make([]store.Finish, len(claimed))
				for i, c := range claimed {
					fs[i] = storetest.RetryAtOnce(c, now)
				}
				if errs, err := s.TaskFinish(ctx, fs); err != nil || errs[0] != nil {
					b.Fatalf("TaskFinish = %v, %v", errs, err)
				}
				done += len(claimed)
			}
			m.Report(b, done)
		})
	}
}

// BenchmarkClaimFinishWorkers claims batches of 256 and has 64 workers
// finish the tasks one TaskFinish call each, as a dispatcher whose workers
// report their own results does: group commit merges their calls.
func BenchmarkClaimFinishWorkers(b *testing.B) {
	s, _ := open(b)
	defer s.Close()
	storetest.Seed(b, s, 2048, 32, 1)
	ctx := context.Background()
	work := make(chan *store.Task, 512)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for c := range work {
				if errs, err := s.TaskFinish(ctx, []store.Finish{storetest.RetryAtOnce(c, c.LeaseUntil.Add(-time.Minute))}); err != nil || errs[0] != nil {
					b.Errorf("TaskFinish = %v, %v", errs, err)
				}
			}
		})
	}
	m := storetest.StartMeter(b)
	now := storetest.BenchStart
	for done := 0; done < b.N; {
		now = now.Add(time.Millisecond)
		claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: min(256, b.N-done)})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range claimed {
			work <- c
		}
		done += len(claimed)
	}
	close(work)
	wg.Wait()
	m.Report(b, b.N)
}

// BenchmarkCreate creates tasks one call at a time (serial: each waits for
// its own commit) and from 64 goroutines at once (group commit).
func BenchmarkCreate(b *testing.B) {
	storetest.BenchCreate(b, func(b *testing.B) store.Store {
		s, _ := open(b)
		b.Cleanup(func() { s.Close() })
		return s
	}, 1, 64)
}
