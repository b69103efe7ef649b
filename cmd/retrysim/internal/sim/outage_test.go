package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// small is an outage quick enough for tests: 300 clients, 2 s down, then 50
// requests/s.
func small(s sim.Strategy) sim.OutageConfig {
	return sim.OutageConfig{
		Clients: 300, Spread: time.Second, Outage: 2 * time.Second, Capacity: 50,
		Bucket: 100 * time.Millisecond, Strategy: s, Seed: 3,
	}
}

func TestRunOutageInvariants(t *testing.T) {
	t.Parallel()
	for _, s := range sim.Strategies(100*time.Millisecond, 5*time.Second) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			c := small(s)
			got, err := sim.RunOutage(c)
			if err != nil {
				t.Fatal(err)
			}
			if got.Admitted != c.Clients {
				t.Errorf("%d requests admitted, want one per client (%d)", got.Admitted, c.Clients)
			}
			sum := 0
			for _, n := range got.Load {
				sum += n
			}
			if sum != got.Calls {
				t.Errorf("the load series counts %d requests, the server received %d", sum, got.Calls)
			}
			// 300 admissions at 50 per second need 6 seconds after the outage.
			if earliest := c.Outage + 5*time.Second; got.Completion < earliest {
				t.Errorf("all done at %v, before %v: the capacity was exceeded", got.Completion, earliest)
			}
			if got.PeakRPS < c.Capacity || got.PeakRPS > got.Calls {
				t.Errorf("peak %d requests/s, want within [%d, %d]", got.PeakRPS, c.Capacity, got.Calls)
			}
			again, _ := sim.RunOutage(c)
			if again.Calls != got.Calls || again.Completion != got.Completion || again.PeakRPS != got.PeakRPS {
				t.Errorf("same seed: %+v, then %+v", got, again)
			}
		})
	}
}

func TestRunOutageNoOutageNoRetries(t *testing.T) {
	t.Parallel()
	c := small(sim.Strategies(100*time.Millisecond, 5*time.Second)[0])
	c.Outage, c.Capacity = 0, c.Clients
	got, err := sim.RunOutage(c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Calls != c.Clients {
		t.Errorf("%d calls, want one per client (%d)", got.Calls, c.Clients)
	}
}

func TestOutageExperimentJitterSpreadsTheLoad(t *testing.T) {
	t.Parallel()
	x := sim.OutageExperiment{Config: small(sim.Strategy{}), Strategies: sim.Strategies(100*time.Millisecond, 5*time.Second), Runs: 2}
	rows, err := x.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]sim.OutageRow{}
	for _, r := range rows {
		by[r.Strategy.Name] = r
	}
	if got, none := by[sim.FullJitter].CallsPerClient, by[sim.NoBackoff].CallsPerClient; got >= none {
		t.Errorf("full jitter: %.1f calls per client, want fewer than no backoff's %.1f", got, none)
	}
	if got, exp := by[sim.FullJitter].PeakRPS, by[sim.Exponential].PeakRPS; got >= exp {
		t.Errorf("full jitter: peak %.0f requests/s, want below un-jittered exponential's %.0f", got, exp)
	}
	if got := len(by[sim.FullJitter].LoadRPS); got == 0 {
		t.Error("no load series")
	}
}

func TestRunOutageRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*sim.OutageConfig)
	}{
		{"no clients", func(c *sim.OutageConfig) { c.Clients = 0 }},
		{"no capacity", func(c *sim.OutageConfig) { c.Capacity = 0 }},
		{"negative outage", func(c *sim.OutageConfig) { c.Outage = -time.Second }},
		{"zero bucket", func(c *sim.OutageConfig) { c.Bucket = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := small(sim.Strategies(time.Millisecond, time.Second)[3])
			tt.change(&c)
			if _, err := sim.RunOutage(c); err == nil {
				t.Error("got no error")
			}
		})
	}
}
