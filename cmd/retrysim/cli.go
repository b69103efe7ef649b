package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

const usage = `usage: retrysim <experiment> [flags]

experiments:
  occ            clients race to update one versioned row (the AWS "Exponential
                 Backoff And Jitter" experiment): writes and completion time
  outage         a crowd retries through an outage and a capacity-limited
                 recovery: calls per client, peak load, time to drain
  amplification  layers of services each retrying the one below, with and
                 without a retry budget (retry.Quota)

Every experiment prints a table, or one JSON object per row with --json, and
draws its charts with --plot FILE.png or FILE.svg. Run "retrysim <experiment>
-h" for its flags.
`

// errUsage reports a command line that could not be understood; the flag
// package has already said why.
var errUsage = errors.New("usage")

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "occ":
		err = runOCC(ctx, args[1:], stdout, stderr)
	case "outage":
		err = runOutage(ctx, args[1:], stdout, stderr)
	case "amplification":
		err = runAmplification(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "retrysim: unknown experiment %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "retrysim:", err)
		return 1
	}
	return 0
}

// output holds the flags every experiment shares.
type output struct {
	json bool
	plot string
	seed uint64
}

func (o *output) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object per row instead of a table")
	fs.StringVar(&o.plot, "plot", "", "also draw the charts to `FILE`.png or FILE.svg")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed; the same seed gives the same figures")
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	return nil
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("retrysim "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// writeJSON prints each row on its own line.
func writeJSON[T any](w io.Writer, rows []T) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// list is a comma-separated flag value, such as 10,20,30.
type list[T any] struct {
	v     *[]T
	parse func(string) (T, error)
}

func (l list[T]) String() string {
	if l.v == nil {
		return ""
	}
	s := make([]string, len(*l.v))
	for i, v := range *l.v {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func (l list[T]) Set(s string) error {
	var out []T
	for part := range strings.SplitSeq(s, ",") {
		v, err := l.parse(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	*l.v = out
	return nil
}

func intList(v *[]int) flag.Value {
	return list[int]{v, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q is not a whole number of at least 1", s)
		}
		return n, nil
	}}
}

func floatList(v *[]float64) flag.Value {
	return list[float64]{v, func(s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return 0, fmt.Errorf("%q is not a rate within [0, 1]", s)
		}
		return f, nil
	}}
}

func stringList(v *[]string) flag.Value {
	return list[string]{v, func(s string) (string, error) { return s, nil }}
}

// latencyFlags registers the network model's flags.
func latencyFlags(fs *flag.FlagSet, l *sim.Latency) {
	l.Mean, l.StdDev = sim.DefaultLatencyMean, sim.DefaultLatencyStdDev
	fs.DurationVar(&l.Mean, "latency", l.Mean, "mean time of one message across the network")
	fs.DurationVar(&l.StdDev, "latency-stddev", l.StdDev, "its standard deviation (times are |Normal(latency, stddev)|)")
}

// ms converts a duration to fractional milliseconds for JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// human rounds a duration for a table: 463ms, 4.29s, 1m41.9s.
func human(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
