package limitstest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Sizes of the concurrent tests: goroutines, each making calls.
const (
	goroutines = 8
	calls      = 50
)

// testConcurrentInFlight: goroutines calling at once, through two values
// of shared limits, never hold more slots than the cap, and release them
// all.
func testConcurrentInFlight(t *testing.T, newShared NewShared) {
	a, b := newShared(t)
	const maxInFlight = 3
	p := store.LimitParams{Key: "t/busy", MaxInFlight: maxInFlight, Hold: time.Hour}
	var held, most, granted atomic.Int64
	var tick atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		l := []store.Limits{a, b}[i%2]
		wg.Go(func() {
			ctx := context.Background()
			for range calls {
				p := p
				p.Now = start().Add(time.Duration(tick.Add(1)) * ms)
				g, err := l.LimitAcquire(ctx, p)
				if err != nil {
					t.Errorf("LimitAcquire = %v", err)
					return
				}
				if !g.OK {
					if g.Reason != store.LimitInFlight {
						t.Errorf("refused with %q, want %q", g.Reason, store.LimitInFlight)
					}
					continue
				}
				// Between the grant and the release the slot is held: the
				// count of holders is at most the cap.
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				granted.Add(1)
				time.Sleep(100 * time.Microsecond)
				held.Add(-1)
				if err := l.LimitRelease(ctx, p.Key, g.Slot); err != nil {
					t.Errorf("LimitRelease = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > maxInFlight {
		t.Errorf("%d slots were held at once, over the cap of %d", m, maxInFlight)
	}
	if granted.Load() < maxInFlight {
		t.Errorf("%d of %d calls were granted", granted.Load(), goroutines*calls)
	}
	// Every slot was released: the cap is free again.
	c := newCaller(t, a, p)
	for i := range maxInFlight {
		c.grant(c.at(time.Minute), 0, fmt.Sprintf("call %d after the rush", i+1))
	}
	c.refusedInFlight(c.at(time.Minute), "the call over the cap after the rush")
}

// testConcurrentRate: goroutines calling at once, through two values of
// shared limits, at simulated times that move on a quarter interval per
// call, are granted tokens no denser than the rate allows: in any window
// of the tokens' times, at most Burst plus the rate times its length.
func testConcurrentRate(t *testing.T, newShared NewShared) {
	a, b := newShared(t)
	const (
		perSecond = 100
		interval  = time.Second / perSecond
		burst     = 4
	)
	p := store.LimitParams{Key: "t/rush", PerSecond: perSecond, Burst: burst, MaxWait: 2 * interval,
		MaxInFlight: 2, Hold: time.Hour}
	var tick atomic.Int64
	var mu sync.Mutex
	var tokens []time.Duration // the grants' times from start
	var wg sync.WaitGroup
	for i := range goroutines {
		l := []store.Limits{a, b}[i%2]
		wg.Go(func() {
			ctx := context.Background()
			for range calls {
				p := p
				p.Now = start().Add(time.Duration(tick.Add(1)) * interval / 4)
				g, err := l.LimitAcquire(ctx, p)
				switch {
				case err != nil:
					t.Errorf("LimitAcquire = %v", err)
					return
				case !g.OK && g.Reason == store.LimitRate && !g.RetryAt.After(p.Now):
					t.Errorf("refused at +%v with RetryAt +%v, not after", p.Now.Sub(start()), g.RetryAt.Sub(start()))
				case !g.OK:
				case g.Wait < 0 || g.Wait > p.MaxWait:
					t.Errorf("granted with Wait %v, want 0 to %v", g.Wait, p.MaxWait)
				default:
					mu.Lock()
					tokens = append(tokens, p.Now.Add(g.Wait).Sub(start()))
					mu.Unlock()
					if err := l.LimitRelease(ctx, p.Key, g.Slot); err != nil {
						t.Errorf("LimitRelease = %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if len(tokens) <= burst {
		t.Fatalf("%d of %d calls were granted", len(tokens), goroutines*calls)
	}
	slices.Sort(tokens)
	for i := range tokens {
		for j := i + burst; j < len(tokens); j++ {
			if n := j - i + 1; time.Duration(n-burst)*interval > tokens[j]-tokens[i] {
				t.Fatalf("%d tokens from +%v to +%v: more than %d and one per %v", n, tokens[i], tokens[j], burst, interval)
			}
		}
	}
}

// testShared: two values on the same data see one rate and one set of
// slots.
func testShared(t *testing.T, newShared NewShared) {
	a, b := newShared(t)
	p := store.LimitParams{Key: "t/shared", PerSecond: 10, Burst: 2, MaxInFlight: 2, Hold: time.Minute}
	ca, cb := newCaller(t, a, p), newCaller(t, b, p)
	sa := ca.grant(ca.at(0), 0, "a's call")
	sb := cb.grant(cb.at(0), 0, "b's call")
	ca.refusedRate(ca.at(0), 200*ms, "a's call after the burst")
	cb.refusedRate(cb.at(0), 300*ms, "b's call after the burst, in line after a's")
	cb.refusedInFlight(cb.at(100*ms), "b's call with a's and b's slots held")
	cb.release(sa)
	ca.grant(ca.at(100*ms), 0, "a's call after b released a's slot")
	ca.release(sb)
	cb.grant(cb.at(200*ms), 0, "b's call after a released b's slot")
}
