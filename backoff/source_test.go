package backoff_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
)

// TestLockedSharesOneSeededSource shares one seeded PCG between goroutines
// through Locked, as a retry.Policy's Rand is shared by every call that uses
// the policy. Under -race an unwrapped PCG fails here. Every draw happens
// exactly once: the delays the goroutines get, sorted, are those of the same
// number of draws made in turn.
func TestLockedSharesOneSeededSource(t *testing.T) {
	t.Parallel()
	const goroutines, each = 4, 2000
	p := backoff.Policy{Kind: backoff.Fixed, Base: time.Hour, Max: backoff.None}
	shared := backoff.Locked(rand.NewPCG(1, 2))

	got := make([][]time.Duration, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			seq := backoff.NewSequence(p, shared)
			for range each {
				got[g] = append(got[g], seq.Next())
			}
		})
	}
	wg.Wait()

	alone := rand.NewPCG(1, 2)
	var want []time.Duration
	for n := range goroutines * each {
		want = append(want, p.Delay(n+1, 0, alone))
	}
	all := slices.Concat(got...)
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Error("the goroutines' delays are not those of the seeded source's draws, each drawn once")
	}
}

func TestLocked(t *testing.T) {
	t.Parallel()
	if backoff.Locked(nil) != nil {
		t.Error("Locked(nil) is not nil, the runtime's generator")
	}
	once := backoff.Locked(rand.NewPCG(1, 2))
	if backoff.Locked(once) != once {
		t.Error("Locked of a Locked source wraps it again")
	}
	a, b := backoff.Locked(rand.NewPCG(9, 9)), rand.NewPCG(9, 9)
	for range 10 {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("Locked source draws %d, its source %d", x, y)
		}
	}
}

// An unlocked PCG shared like this is a data race; run with -race to see the
// difference Locked makes.
func BenchmarkLocked(b *testing.B) {
	p := backoff.Default()
	src := backoff.Locked(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := 0
		for pb.Next() {
			n = n%10 + 1
			p.Delay(n, 0, src)
		}
	})
}
