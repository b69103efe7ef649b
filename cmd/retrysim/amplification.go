package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// quotaRow is a retry.QuotaConfig in JSON.
type quotaRow struct {
	Capacity      float64 `json:"capacity"`
	RetryCost     float64 `json:"retryCost"`
	SuccessRefill float64 `json:"successRefill"`
}

// amplificationRow is one line of `retrysim amplification --json`.
type amplificationRow struct {
	Experiment            string    `json:"experiment"`
	Layers                int       `json:"layers"`
	Attempts              int       `json:"attempts"`
	FailureRate           float64   `json:"failureRate"`
	Quota                 *quotaRow `json:"quota"` // null: no retry budget
	Requests              int       `json:"requests"`
	Seed                  uint64    `json:"seed"`
	BottomCallsPerRequest float64   `json:"bottomCallsPerRequest"`
	SuccessRate           float64   `json:"successRate"`
}

func runAmplification(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("amplification", stderr)
	var (
		out   output
		c     = sim.AmplificationConfig{Layers: sim.DefaultLayers, Attempts: sim.DefaultAttempts, Requests: sim.DefaultRequests}
		rates = sim.DefaultFailureRates()
		quota = retry.QuotaConfig{
			Capacity: retry.DefaultQuotaCapacity, RetryCost: retry.DefaultQuotaRetryCost,
			SuccessRefill: retry.DefaultQuotaSuccessRefill,
		}
	)
	out.register(fs)
	fs.IntVar(&c.Layers, "layers", c.Layers, "layers of services, each retrying the one below")
	fs.IntVar(&c.Attempts, "attempts", c.Attempts, "attempts each layer makes, the first included")
	fs.Var(floatList(&rates), "failure-rates", "failure rates of the bottom layer to try, comma-separated")
	fs.IntVar(&c.Requests, "requests", c.Requests, "user requests per configuration")
	fs.Float64Var(&quota.Capacity, "quota-capacity", quota.Capacity, "retry budget: tokens in each layer's retry.Quota when full")
	fs.Float64Var(&quota.RetryCost, "quota-cost", quota.RetryCost, "retry budget: tokens a retry takes")
	fs.Float64Var(&quota.SuccessRefill, "quota-refill", quota.SuccessRefill, "retry budget: tokens a success gives back")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: retrysim amplification [flags]

User requests go through layers of services, each calling the one below with
retry.Do, and the bottom fails at a given rate. Reports, with and without a
retry budget (one retry.Quota per layer), the calls reaching the bottom per
user request and the share of user requests that succeed.

`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	c.Seed = out.seed
	var rows []amplificationRow
	for _, rate := range rates {
		for _, q := range []*retry.QuotaConfig{nil, &quota} {
			c.FailureRate, c.Quota = rate, q
			r, err := sim.RunAmplification(ctx, c)
			if err != nil {
				return err
			}
			var qr *quotaRow
			if q != nil {
				qr = &quotaRow{q.Capacity, q.RetryCost, q.SuccessRefill}
			}
			rows = append(rows, amplificationRow{
				Experiment: "amplification", Layers: c.Layers, Attempts: c.Attempts, FailureRate: rate,
				Quota: qr, Requests: c.Requests, Seed: c.Seed,
				BottomCallsPerRequest: r.BottomPerRequest(), SuccessRate: r.SuccessRate(),
			})
		}
	}
	if out.plot != "" {
		if err := plotAmplification(out.plot, rows); err != nil {
			return err
		}
	}
	if out.json {
		return writeJSON(stdout, rows)
	}
	fmt.Fprintf(stdout, "%d layers × %d attempts, %d user requests per row (seed %d)\n", c.Layers, c.Attempts, c.Requests, c.Seed)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bottom failure rate\tretry budget\tbottom calls/request\tuser success rate\t")
	for _, r := range rows {
		budget := "none"
		if r.Quota != nil {
			budget = fmt.Sprintf("quota %g/%g/%g", r.Quota.Capacity, r.Quota.RetryCost, r.Quota.SuccessRefill)
		}
		fmt.Fprintf(tw, "%g%%\t%s\t%.3f\t%.2f%%\t\n", 100*r.FailureRate, budget, r.BottomCallsPerRequest, 100*r.SuccessRate)
	}
	return tw.Flush()
}
