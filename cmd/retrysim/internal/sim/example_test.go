package sim_test

import (
	"fmt"
	"time"

	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

func ExampleRunOCC() {
	for _, s := range sim.PostStrategies(5*time.Millisecond, 2*time.Second) {
		r := sim.RunOCC(sim.OCCConfig{Clients: 20, Strategy: s, Seed: 1})
		fmt.Printf("%s: %d of 20 clients wrote, version %d\n", s.Name, r.Succeeded, r.Version)
	}
	// Output:
	// none: 20 of 20 clients wrote, version 20
	// exponential: 20 of 20 clients wrote, version 20
	// equal: 20 of 20 clients wrote, version 20
	// full: 20 of 20 clients wrote, version 20
	// decorrelated: 20 of 20 clients wrote, version 20
}
