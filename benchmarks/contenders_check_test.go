package benchmarks_test

import (
	"errors"
	"testing"
)

// The benchmarks compare like with like only if every library really makes
// the calls the workload says. These tests hold each setup to that.
func TestContendersDoTheWorkload(t *testing.T) {
	t.Parallel()
	for _, c := range contenders {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name      string
				prepare   func(op func() error) func() error
				fails     int
				wantCalls int
				wantErr   bool
			}{
				{"success", c.typical, 0, 1, false},
				{"two failures then success", c.zeroDelay, 2, 3, false},
				{"three failures: attempts exhausted", c.zeroDelay, 3, 3, true},
			}
			for _, tt := range tests {
				f := &flaky{fails: tt.fails}
				run := tt.prepare(f.call)
				for round := range 2 { // the second round checks that nothing leaks between calls
					f.calls = 0
					err := run()
					if f.calls != tt.wantCalls {
						t.Errorf("%s, round %d: %d calls, want %d", tt.name, round, f.calls, tt.wantCalls)
					}
					if (err != nil) != tt.wantErr {
						t.Errorf("%s, round %d: error %v, want error %v", tt.name, round, err, tt.wantErr)
					}
					if err != nil && !errors.Is(err, errFlaky) {
						t.Errorf("%s, round %d: %v does not wrap the operation's error", tt.name, round, err)
					}
				}
			}
		})
	}
}

func TestDelayersComputeExponentialDelays(t *testing.T) {
	t.Parallel()
	for _, d := range delayers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			next := d.prepare()
			for round := range 3 {
				got := next()
				for n, v := range got {
					// The raw delay before retry n+1, capped; ±50% jitter may
					// go half above it.
					raw := min(delayLimit, delayBase<<n)
					hi := raw
					if d.jitter != "full" {
						hi += raw / 2
					}
					if v < 0 || v > hi {
						t.Errorf("round %d, retry %d: delay %v, want within [0, %v]", round, n+1, v, hi)
					}
				}
				if got[retries-1] == 0 && got[retries-2] == 0 {
					t.Errorf("round %d: delays %v do not grow", round, *got)
				}
			}
		})
	}
}
