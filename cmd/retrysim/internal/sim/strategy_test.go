package sim_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// The post's formulas, written out to check the mapping onto the engine:
// exponential, full and equal start from min(cap, base·2^n), n = 1 at the
// first failure; decorrelated draws from [base, min(cap, 3·prev)].
func TestPostStrategiesFollowThePost(t *testing.T) {
	t.Parallel()
	src := backoff.Locked(rand.NewPCG(1, 2)) // shared by the parallel subtests
	post := func(n int) time.Duration { return min(ceiling, base<<n) }
	for _, s := range sim.PostStrategies(base, ceiling) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			var prev time.Duration
			for n := 1; n <= 12; n++ {
				got := s.Backoff.Delay(n, prev, src)
				lo, hi := time.Duration(0), post(n)
				switch s.Name {
				case sim.NoBackoff:
					hi = 0
				case sim.Exponential:
					lo = hi
				case sim.EqualJitter:
					lo = hi / 2
				case sim.Decorrelated:
					p := prev
					if p == 0 {
						p = base
					}
					lo, hi = base, min(ceiling, 3*p)
				}
				if got < lo || got > hi {
					t.Errorf("retry %d: delay %v, want within [%v, %v]", n, got, lo, hi)
				}
				prev = got
			}
		})
	}
}

func TestPostStrategiesFirstWaits(t *testing.T) {
	t.Parallel()
	got := map[string]time.Duration{}
	for _, s := range sim.PostStrategies(base, ceiling) {
		got[s.Name] = s.Backoff.Raw(1)
	}
	if got[sim.Exponential] != 10*time.Millisecond {
		t.Errorf("first un-jittered exponential wait %v, want 10ms (base·2^1)", got[sim.Exponential])
	}
	for _, s := range sim.PostStrategies(base, ceiling) {
		if s.Name == sim.Decorrelated && s.Backoff.Base != base {
			t.Errorf("decorrelated grows from %v, want the post's base %v", s.Backoff.Base, base)
		}
		if err := s.Backoff.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	all := sim.Strategies(time.Millisecond, time.Second)
	tests := []struct {
		name    string
		names   []string
		want    []string
		wantErr bool
	}{
		{"all by default", nil, []string{"none", "exponential", "equal", "full", "decorrelated"}, false},
		{"in the order asked", []string{"full", "none"}, []string{"full", "none"}, false},
		{"unknown", []string{"full", "fibonacci"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := sim.Select(all, tt.names)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d strategies, want %v", len(got), tt.want)
			}
			for i := range got {
				if got[i].Name != tt.want[i] {
					t.Errorf("[%d] = %s, want %s", i, got[i].Name, tt.want[i])
				}
			}
		})
	}
}
