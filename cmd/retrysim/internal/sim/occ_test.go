package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

const base, ceiling = 5 * time.Millisecond, 2 * time.Second

func TestRunOCCInvariants(t *testing.T) {
	t.Parallel()
	for _, s := range sim.PostStrategies(base, ceiling) {
		for _, clients := range []int{1, 2, 7, 40} {
			t.Run(fmt.Sprintf("%s/%d", s.Name, clients), func(t *testing.T) {
				t.Parallel()
				for run := range 3 {
					got := sim.RunOCC(sim.OCCConfig{Clients: clients, Strategy: s, Seed: 7, Run: run})
					if got.Succeeded != clients {
						t.Errorf("run %d: %d of %d clients succeeded", run, got.Succeeded, clients)
					}
					if got.Version != int64(got.Succeeded) {
						t.Errorf("run %d: version %d, want one per successful write (%d)", run, got.Version, got.Succeeded)
					}
					// Each client's failures are caused by distinct successes of
					// the others, so it writes at most clients times.
					if got.Calls < clients || got.Calls > clients*clients {
						t.Errorf("run %d: %d writes, want within [%d, %d]", run, got.Calls, clients, clients*clients)
					}
					// A write needs four messages of about 10 ms each.
					if got.Completion < 20*time.Millisecond {
						t.Errorf("run %d: completed at %v, too early for four messages", run, got.Completion)
					}
				}
			})
		}
	}
}

func TestRunOCCOneClientWritesOnce(t *testing.T) {
	t.Parallel()
	got := sim.RunOCC(sim.OCCConfig{Clients: 1, Strategy: sim.PostStrategies(base, ceiling)[0], Seed: 1})
	if got.Calls != 1 || got.Version != 1 {
		t.Errorf("got %d writes and version %d, want 1 and 1", got.Calls, got.Version)
	}
}

func TestRunOCCSameSeedSameResult(t *testing.T) {
	t.Parallel()
	for _, s := range sim.PostStrategies(base, ceiling) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			c := sim.OCCConfig{Clients: 30, Strategy: s, Seed: 42, Run: 3}
			first, second := sim.RunOCC(c), sim.RunOCC(c)
			if first != second {
				t.Errorf("same seed: %+v, then %+v", first, second)
			}
			c.Seed = 43
			if other := sim.RunOCC(c); other == first {
				t.Errorf("seeds 42 and 43 both gave %+v; the seed is not used", first)
			}
		})
	}
}

func TestOCCExperimentDoesNotDependOnWorkers(t *testing.T) {
	t.Parallel()
	x := sim.OCCExperiment{Strategies: sim.PostStrategies(base, ceiling), Clients: []int{5, 25}, Runs: 6, Seed: 9, Workers: 1}
	want, err := x.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	x.Workers = 4
	got, err := x.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Calls != want[i].Calls || got[i].Completion != want[i].Completion {
			t.Errorf("row %d: 4 workers %+v, 1 worker %+v", i, got[i], want[i])
		}
	}
}

// The post's findings, which the model must reproduce at high contention.
func TestOCCJitterBeatsNoJitter(t *testing.T) {
	t.Parallel()
	rows, err := sim.OCCExperiment{Strategies: sim.PostStrategies(base, ceiling), Clients: []int{60}, Runs: 5, Seed: 1}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]sim.OCCRow{}
	for _, r := range rows {
		by[r.Strategy.Name] = r
	}
	for _, jittered := range []string{sim.FullJitter, sim.EqualJitter, sim.Decorrelated} {
		if got, none := by[jittered].Calls, by[sim.NoBackoff].Calls; got >= none {
			t.Errorf("%s: %.0f writes, want fewer than no backoff's %.0f", jittered, got, none)
		}
		if got, exp := by[jittered].Calls, by[sim.Exponential].Calls; got >= exp {
			t.Errorf("%s: %.0f writes, want fewer than un-jittered exponential's %.0f", jittered, got, exp)
		}
		if got, exp := by[jittered].Completion, by[sim.Exponential].Completion; got >= exp {
			t.Errorf("%s: done at %v, want sooner than un-jittered exponential at %v", jittered, got, exp)
		}
	}
}

func TestOCCExperimentRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		x    sim.OCCExperiment
	}{
		{"no runs", sim.OCCExperiment{Strategies: sim.PostStrategies(base, ceiling), Clients: []int{5}}},
		{"zero clients", sim.OCCExperiment{Strategies: sim.PostStrategies(base, ceiling), Clients: []int{0}, Runs: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := tt.x.Run(context.Background()); err == nil {
				t.Error("got no error")
			}
		})
	}
}

func TestOCCExperimentStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	x := sim.OCCExperiment{Strategies: sim.PostStrategies(base, ceiling), Clients: []int{5}, Runs: 1}
	if _, err := x.Run(ctx); err != context.Canceled {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func BenchmarkRunOCC(b *testing.B) {
	for _, s := range sim.PostStrategies(base, ceiling) {
		b.Run(s.Name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sim.RunOCC(sim.OCCConfig{Clients: 100, Strategy: s, Seed: 1, Run: i})
			}
		})
	}
}
