package limits_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/destination/limits/limitstest"
	"github.com/retrykit/retry/service/store"
)

func TestLocal(t *testing.T) {
	t.Parallel()
	limitstest.Run(t, func(*testing.T) store.Limits { return limits.NewLocal() })
}

func TestLocalShared(t *testing.T) {
	t.Parallel()
	limitstest.RunShared(t, func(*testing.T) (store.Limits, store.Limits) {
		l := limits.NewLocal()
		return l, l
	})
}

// TestLocalForgets: a key is forgotten Idle after its state stopped
// mattering, and not before, and a forgotten key answers as it would have.
func TestLocalForgets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := limits.NewLocal()
	t0 := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	acquire := func(key string, at time.Time, p store.LimitParams) store.LimitGrant {
		t.Helper()
		p.Key, p.Now = key, at
		g, err := l.LimitAcquire(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	rate := store.LimitParams{PerSecond: 1, Burst: 1}
	for i := range 100 {
		acquire(fmt.Sprint("t/once", i), t0, rate)
	}
	// A slot held an hour keeps its key.
	held := acquire("t/held", t0, store.LimitParams{MaxInFlight: 1, Hold: time.Hour})
	if !held.OK {
		t.Fatalf("the held call = %+v", held)
	}
	// Calls without limits hold nothing.
	acquire("t/free", t0, store.LimitParams{})
	if n := limits.KeysHeld(l); n != 101 {
		t.Fatalf("%d keys held, want 101", n)
	}
	later := t0.Add(time.Second + limits.Idle)
	acquire("t/later", later, rate)
	if n := limits.KeysHeld(l); n != 2 {
		t.Errorf("%d keys held after Idle, want 2: the held slot's and the new one", n)
	}
	if g := acquire("t/once0", later, rate); !g.OK || g.Wait != 0 {
		t.Errorf("a forgotten key's call = %+v, want granted at once", g)
	}
	if g := acquire("t/held", later, store.LimitParams{MaxInFlight: 1, Hold: time.Hour}); g.OK {
		t.Errorf("a call beside a slot held = %+v, want refused", g)
	}
	if err := l.LimitRelease(ctx, "t/held", held.Slot); err != nil {
		t.Fatal(err)
	}
	if g := acquire("t/held", later, store.LimitParams{MaxInFlight: 1, Hold: time.Hour}); !g.OK {
		t.Errorf("a call after the release = %+v, want granted", g)
	}
}

func BenchmarkLocal(b *testing.B) {
	limitstest.Bench(b, limits.NewLocal())
}
