package sim_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// expected returns the mean bottom calls per request and the success rate of
// layers of retries without a quota, worked out by hand: a layer makes its
// next attempt with the probability that all before it failed.
func expected(layers, attempts int, failure float64) (calls, success float64) {
	calls, success = 1, 1-failure
	for range layers {
		tries := 0.0
		for k := range attempts {
			tries += math.Pow(1-success, float64(k))
		}
		calls *= tries
		success = 1 - math.Pow(1-success, float64(attempts))
	}
	return calls, success
}

func TestRunAmplificationMatchesTheory(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{0, 0.01, 0.1, 0.5, 0.9, 1} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			got, err := sim.RunAmplification(context.Background(), sim.AmplificationConfig{
				Layers: 3, Attempts: 3, FailureRate: rate, Requests: 20000, Seed: 5,
			})
			if err != nil {
				t.Fatal(err)
			}
			calls, success := expected(3, 3, rate)
			if d := math.Abs(got.BottomPerRequest()-calls) / calls; d > 0.03 {
				t.Errorf("%.3f bottom calls per request, want %.3f", got.BottomPerRequest(), calls)
			}
			if d := math.Abs(got.SuccessRate() - success); d > 0.01 {
				t.Errorf("success rate %.4f, want %.4f", got.SuccessRate(), success)
			}
		})
	}
}

func TestRunAmplificationQuotaStopsTheStorm(t *testing.T) {
	t.Parallel()
	c := sim.AmplificationConfig{Layers: 3, Attempts: 3, FailureRate: 1, Requests: 10000, Seed: 1}
	without, err := sim.RunAmplification(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	c.Quota = &retry.QuotaConfig{}
	with, err := sim.RunAmplification(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := without.BottomPerRequest(), 27.0; got != want {
		t.Errorf("without a quota: %v bottom calls per request, want 3^3 = %v", got, want)
	}
	// Each layer's 100 tokens are spent and never refilled; after that every
	// request reaches the bottom once.
	if got := with.BottomPerRequest(); got > 1.5 {
		t.Errorf("with a quota: %v bottom calls per request, want close to 1", got)
	}
}

func TestRunAmplificationQuotaIdleWhenHealthy(t *testing.T) {
	t.Parallel()
	c := sim.AmplificationConfig{Layers: 3, Attempts: 3, FailureRate: 0.01, Requests: 5000, Seed: 2}
	without, _ := sim.RunAmplification(context.Background(), c)
	c.Quota = &retry.QuotaConfig{}
	with, _ := sim.RunAmplification(context.Background(), c)
	if with != without {
		t.Errorf("at 1%% failures the quota changed the outcome: %+v without, %+v with", without, with)
	}
}

func TestRunAmplificationRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    sim.AmplificationConfig
	}{
		{"no layers", sim.AmplificationConfig{Attempts: 3, Requests: 1}},
		{"no attempts", sim.AmplificationConfig{Layers: 3, Requests: 1}},
		{"rate above 1", sim.AmplificationConfig{Layers: 3, Attempts: 3, Requests: 1, FailureRate: 1.5}},
		{"rate NaN", sim.AmplificationConfig{Layers: 3, Attempts: 3, Requests: 1, FailureRate: math.NaN()}},
		{"bad quota", sim.AmplificationConfig{Layers: 3, Attempts: 3, Requests: 1, Quota: &retry.QuotaConfig{Capacity: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := sim.RunAmplification(context.Background(), tt.c); err == nil {
				t.Error("got no error")
			}
		})
	}
}
