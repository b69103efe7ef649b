package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// outageRow is one line of `retrysim outage --json`.
type outageRow struct {
	Experiment     string         `json:"experiment"`
	Strategy       string         `json:"strategy"`
	Backoff        backoff.Policy `json:"backoff"`
	Clients        int            `json:"clients"`
	SpreadMs       float64        `json:"spreadMs"`
	OutageMs       float64        `json:"outageMs"`
	CapacityRps    int            `json:"capacityRps"`
	Runs           int            `json:"runs"`
	Seed           uint64         `json:"seed"`
	CallsPerClient float64        `json:"callsPerClient"`
	GaveUp         float64        `json:"gaveUp"`
	PeakRps        float64        `json:"peakRps"`
	PeakCapacity   float64        `json:"peakOverCapacity"`
	CompletionMs   float64        `json:"completionMs"`
	LoadBucketMs   float64        `json:"loadBucketMs"`
	LoadRps        []float64      `json:"loadRps"`
}

func runOutage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("outage", stderr)
	var (
		out        output
		x          = sim.OutageExperiment{Config: sim.DefaultOutage(sim.Strategy{})}
		c          = &x.Config
		names      []string
		base, ceil time.Duration
	)
	out.register(fs)
	fs.IntVar(&c.Clients, "clients", c.Clients, "clients, each with one request")
	fs.DurationVar(&c.Spread, "spread", c.Spread, "first attempts are spread uniformly over this time")
	fs.DurationVar(&c.Outage, "outage", c.Outage, "the server rejects everything for this long, from time 0")
	fs.IntVar(&c.Capacity, "capacity", c.Capacity, "requests per second the server admits after the outage; it rejects the rest at once")
	fs.DurationVar(&c.Bucket, "bucket", c.Bucket, "width of the bins of the load series (--json, --plot)")
	fs.DurationVar(&base, "base", 100*time.Millisecond, "first wait of the exponential strategies, and decorrelated jitter's floor")
	fs.DurationVar(&ceil, "cap", 10*time.Second, "the longest wait")
	fs.Var(stringList(&names), "strategies", "strategies to run, comma-separated (none, exponential, equal, full, decorrelated,\nfull+quota, aws-adaptive, client-limiter, shared-limiter, shared-cubic); all by default")
	fs.IntVar(&x.Runs, "runs", 1, "runs averaged for each strategy")
	fs.IntVar(&x.Workers, "workers", 0, "goroutines sharing the runs; 0 means one per CPU")
	latencyFlags(fs, &c.Latency)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: retrysim outage [flags]

Clients each send one request and retry it, with no attempt limit, through an
outage and the capacity-limited recovery after it. Reports calls per client,
the peak requests/s in any 1 s window after the outage (and as a multiple of
the capacity), the time the last client was served, and how many gave up.

Beside the backoff strategies: full jitter with a retry quota shared by all
clients (full+quota, the AWS standard mode's: 500 tokens, 5 per retry, 1 back
per success), with a model of the AWS SDK's adaptive mode per client
(aws-adaptive), with a retry.Limiter per client (client-limiter) or one
shared by all (shared-limiter, as retryd shares one per host), and with the
adaptive mode's CUBIC bucket shared by all (shared-cubic).

`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if base <= 0 || ceil < base || c.Latency.Mean <= 0 || c.Latency.StdDev < 0 {
		return errors.New("outage: want 0 < base ≤ cap, a positive latency and a stddev of 0 or more")
	}
	var err error
	if x.Strategies, err = sim.Select(append(sim.Strategies(base, ceil), sim.LimitStrategies(base, ceil)...), names); err != nil {
		return err
	}
	c.Seed = out.seed
	rows, err := x.Run(ctx)
	if err != nil {
		return err
	}
	if out.plot != "" {
		if err := plotOutage(out.plot, x, rows); err != nil {
			return err
		}
	}
	if out.json {
		js := make([]outageRow, len(rows))
		for i, r := range rows {
			js[i] = outageRow{
				Experiment: "outage", Strategy: r.Strategy.Name, Backoff: r.Strategy.Backoff,
				Clients: c.Clients, SpreadMs: ms(c.Spread), OutageMs: ms(c.Outage), CapacityRps: c.Capacity,
				Runs: r.Runs, Seed: c.Seed, CallsPerClient: r.CallsPerClient, GaveUp: r.GaveUp,
				PeakRps: r.PeakRPS, PeakCapacity: r.PeakRPS / float64(c.Capacity),
				CompletionMs: ms(r.Completion), LoadBucketMs: ms(c.Bucket), LoadRps: r.LoadRPS,
			}
		}
		return writeJSON(stdout, js)
	}
	fmt.Fprintf(stdout, "%d clients, %v outage, then %d requests/s; mean of %d run(s) (seed %d)\n",
		c.Clients, c.Outage, c.Capacity, x.Runs, c.Seed)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tcalls/client\tpeak req/s after outage\t× capacity\tall served at\tgave up\t")
	for _, r := range rows {
		served := human(r.Completion)
		if r.GaveUp > 0 {
			served = "never" // not everyone is served
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%.2f\t%s\t%.0f\t\n", r.Strategy.Name, r.CallsPerClient, r.PeakRPS, r.PeakRPS/float64(c.Capacity), served, r.GaveUp)
	}
	return tw.Flush()
}
