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

// occRow is one line of `retrysim occ --json`.
type occRow struct {
	Experiment      string         `json:"experiment"`
	Strategy        string         `json:"strategy"`
	Backoff         backoff.Policy `json:"backoff"`
	Clients         int            `json:"clients"`
	Runs            int            `json:"runs"`
	Seed            uint64         `json:"seed"`
	LatencyMs       float64        `json:"latencyMs"`
	LatencyStdDevMs float64        `json:"latencyStdDevMs"`
	Calls           float64        `json:"calls"`
	GaveUp          float64        `json:"gaveUp"`
	CompletionMs    float64        `json:"completionMs"`
}

func defaultOCCClients() []int {
	var c []int
	for n := 10; n <= 190; n += 10 {
		c = append(c, n)
	}
	return c
}

func runOCC(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("occ", stderr)
	var (
		out        output
		x          = sim.OCCExperiment{Clients: defaultOCCClients()}
		names      []string
		base, ceil time.Duration
	)
	out.register(fs)
	fs.Var(intList(&x.Clients), "clients", "client counts to try, comma-separated")
	fs.IntVar(&x.Runs, "runs", 100, "runs averaged for each strategy and client count")
	fs.DurationVar(&base, "base", 5*time.Millisecond, "the post's base: exponential waits min(cap, base·2^n) after the n-th failure")
	fs.DurationVar(&ceil, "cap", 2*time.Second, "the longest wait")
	fs.Var(stringList(&names), "strategies", "strategies to run, comma-separated (none, exponential, equal, full, decorrelated,\nfull+quota, aws-adaptive, client-limiter, shared-limiter, shared-cubic; see retrysim outage -h); all by default")
	fs.IntVar(&x.Workers, "workers", 0, "goroutines sharing the runs; 0 means one per CPU")
	latencyFlags(fs, &x.Latency)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: retrysim occ [flags]

Clients race to update one row with optimistic concurrency: read the version,
write conditionally on it, back off after a failed write, until each has one
successful write. Reports the writes the server received ("calls") and the
time of the last event, averaged over the runs. The holding-back strategies
(full+quota, aws-adaptive, client-limiter, shared-limiter, shared-cubic) are
those of retrysim outage, on the post's full jitter; their limiters take
every failed write for an overload signal.

`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if base <= 0 || ceil < base || x.Latency.Mean <= 0 || x.Latency.StdDev < 0 {
		return errors.New("occ: want 0 < base ≤ cap, a positive latency and a stddev of 0 or more")
	}
	var err error
	if x.Strategies, err = sim.Select(append(sim.PostStrategies(base, ceil), sim.LimitStrategies(2*base, ceil)...), names); err != nil {
		return err
	}
	x.Seed = out.seed
	rows, err := x.Run(ctx)
	if err != nil {
		return err
	}
	if out.plot != "" {
		if err := plotOCC(out.plot, x, rows); err != nil {
			return err
		}
	}
	if out.json {
		js := make([]occRow, len(rows))
		for i, r := range rows {
			js[i] = occRow{
				Experiment: "occ", Strategy: r.Strategy.Name, Backoff: r.Strategy.Backoff,
				Clients: r.Clients, Runs: r.Runs, Seed: x.Seed,
				LatencyMs: ms(x.Latency.Mean), LatencyStdDevMs: ms(x.Latency.StdDev),
				Calls: r.Calls, GaveUp: r.GaveUp, CompletionMs: ms(r.Completion),
			}
		}
		return writeJSON(stdout, js)
	}
	return occTable(stdout, x, rows)
}

// occTable prints two grids, writes and completion time, with a line per
// client count and a column per strategy.
func occTable(w io.Writer, x sim.OCCExperiment, rows []sim.OCCRow) error {
	cell := func(s, c int) sim.OCCRow { return rows[s*len(x.Clients)+c] }
	grid := func(title string, value func(sim.OCCRow) string) {
		fmt.Fprintf(w, "%s, mean of %d runs (seed %d)\n", title, x.Runs, x.Seed)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "clients\t")
		for _, s := range x.Strategies {
			fmt.Fprintf(tw, "%s\t", s.Name)
		}
		fmt.Fprintln(tw)
		for c, n := range x.Clients {
			fmt.Fprintf(tw, "%d\t", n)
			for s := range x.Strategies {
				fmt.Fprintf(tw, "%s\t", value(cell(s, c)))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	grid("Writes received by the server", func(r sim.OCCRow) string { return fmt.Sprintf("%.1f", r.Calls) })
	fmt.Fprintln(w)
	grid("Completion time (last event)", func(r sim.OCCRow) string { return human(r.Completion) })
	for _, r := range rows {
		if r.GaveUp > 0 {
			fmt.Fprintln(w)
			grid("Clients that gave up (a retry quota refused a retry)", func(r sim.OCCRow) string { return fmt.Sprintf("%.1f", r.GaveUp) })
			break
		}
	}
	return nil
}
