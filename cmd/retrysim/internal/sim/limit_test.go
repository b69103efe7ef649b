package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// TestOutageLimiterTargets holds the figures issue 17 asks of the limiter,
// in the default outage (10,000 clients, 30 s down, then 1,000 requests/s;
// seed 1). The runs are deterministic: these are results, not samples.
//
//   - One Limiter shared by all clients keeps the server within 1.1× its
//     capacity in every second after the outage, and serves everyone no
//     later than full jitter alone.
//   - A Limiter per client beats the model of the AWS SDK's adaptive mode
//     on both the peak and the time to serve everyone.
//   - The shared Limiter's AIMD drains sooner than the adaptive mode's
//     CUBIC bucket shared the same way.
func TestOutageLimiterTargets(t *testing.T) {
	t.Parallel()
	if testing.Short() || raceEnabled {
		// A run is one goroutine: the race detector has nothing to find in
		// it (the parallel runner is raced in the other tests).
		t.Skip("10,000 clients: not with -short or -race")
	}
	const base, ceil = 100 * time.Millisecond, 10 * time.Second
	all, err := sim.Select(append(sim.Strategies(base, ceil), sim.LimitStrategies(base, ceil)...),
		[]string{sim.FullJitter, sim.AWSAdaptive, sim.ClientLimiter, sim.SharedLimiter, sim.SharedCUBIC})
	if err != nil {
		t.Fatal(err)
	}
	x := sim.OutageExperiment{Config: sim.DefaultOutage(sim.Strategy{}), Strategies: all, Runs: 1}
	x.Config.Seed = 1
	rows, err := x.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]sim.OutageRow{}
	for _, r := range rows {
		by[r.Strategy.Name] = r
		t.Logf("%-15s peak %5.0f/s (%.2f×), all served at %v", r.Strategy.Name, r.PeakRPS, r.PeakRPS/float64(x.Config.Capacity), r.Completion)
		if r.GaveUp != 0 {
			t.Errorf("%s: %v clients gave up, want none", r.Strategy.Name, r.GaveUp)
		}
	}
	capacity := float64(x.Config.Capacity)
	full, aws, client, shared, cubic := by[sim.FullJitter], by[sim.AWSAdaptive], by[sim.ClientLimiter], by[sim.SharedLimiter], by[sim.SharedCUBIC]
	if shared.PeakRPS > 1.1*capacity {
		t.Errorf("shared limiter: peak %.0f/s, want at most 1.1× the capacity (%.0f)", shared.PeakRPS, 1.1*capacity)
	}
	if shared.Completion > full.Completion {
		t.Errorf("shared limiter: all served at %v, want no later than full jitter (%v)", shared.Completion, full.Completion)
	}
	if client.PeakRPS >= aws.PeakRPS || client.Completion >= aws.Completion {
		t.Errorf("client limiter: peak %.0f/s, served at %v; want below the AWS adaptive model's %.0f/s and %v",
			client.PeakRPS, client.Completion, aws.PeakRPS, aws.Completion)
	}
	if shared.Completion >= cubic.Completion {
		t.Errorf("shared limiter (AIMD): served at %v, want sooner than shared CUBIC (%v)", shared.Completion, cubic.Completion)
	}
}

func TestOutageHoldingBackInvariants(t *testing.T) {
	t.Parallel()
	for _, s := range sim.LimitStrategies(100*time.Millisecond, 5*time.Second) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			c := small(s)
			got, err := sim.RunOutage(c)
			if err != nil {
				t.Fatal(err)
			}
			if got.Admitted+got.GaveUp != c.Clients {
				t.Errorf("%d served and %d gave up, want %d clients in all", got.Admitted, got.GaveUp, c.Clients)
			}
			if s.Name == sim.FullQuota {
				// 500 tokens pay for 100 retries; the outage makes no
				// success to earn more.
				if got.Calls != c.Clients+100 || got.GaveUp != c.Clients {
					t.Errorf("%d calls, %d gave up; want %d and all", got.Calls, got.GaveUp, c.Clients+100)
				}
			} else if got.GaveUp != 0 {
				t.Errorf("%d gave up, want none", got.GaveUp)
			}
			again, _ := sim.RunOutage(c)
			if again.Calls != got.Calls || again.Completion != got.Completion || again.PeakRPS != got.PeakRPS {
				t.Errorf("same seed: %+v, then %+v", got, again)
			}
		})
	}
}

func TestRunOutageRejectsBadLimiter(t *testing.T) {
	t.Parallel()
	s := sim.LimitStrategies(time.Millisecond, time.Second)[3]
	bad := *s.Limiter
	bad.Decrease = 2
	s.Limiter = &bad
	if _, err := sim.RunOutage(small(s)); err == nil {
		t.Error("got no error")
	}
}

func TestOCCHoldingBack(t *testing.T) {
	t.Parallel()
	for _, s := range sim.LimitStrategies(2*base, ceiling) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for run := range 3 {
				got := sim.RunOCC(sim.OCCConfig{Clients: 40, Strategy: s, Seed: 7, Run: run})
				if got.Succeeded+got.GaveUp != 40 || got.Version != int64(got.Succeeded) {
					t.Errorf("run %d: %+v; want every client served or given up, one version per success", run, got)
				}
				if again := sim.RunOCC(sim.OCCConfig{Clients: 40, Strategy: s, Seed: 7, Run: run}); again != got {
					t.Errorf("same seed: %+v, then %+v", got, again)
				}
			}
		})
	}
}

// TestOCCSharedLimiterCutsContention: one limiter for all the writers,
// which takes each conflict for an overload, has the server receive fewer
// writes than full jitter alone, and finish no later.
func TestOCCSharedLimiterCutsContention(t *testing.T) {
	t.Parallel()
	all := append(sim.PostStrategies(base, ceiling), sim.LimitStrategies(2*base, ceiling)...)
	ss, err := sim.Select(all, []string{sim.FullJitter, sim.SharedLimiter})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := sim.OCCExperiment{Strategies: ss, Clients: []int{100}, Runs: 10, Seed: 1}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	full, shared := rows[0], rows[1]
	if shared.Calls >= full.Calls/2 || shared.Completion > full.Completion {
		t.Errorf("shared limiter: %.0f writes, done at %v; want under half of full jitter's %.0f, and no later than %v",
			shared.Calls, shared.Completion, full.Calls, full.Completion)
	}
}
