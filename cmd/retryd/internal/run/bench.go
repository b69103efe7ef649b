package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/retrykit/retry/service/scheduler"
)

// benchConfig is what the bench flags say.
type benchConfig struct {
	mode     string
	store    string
	dir      string
	clients  int
	tasks    int // 0: the mode's default (defaultAPITasks, defaultLoopTasks)
	batch    int
	rate     int // 0: the mode's default (defaultAPIRate, defaultLoopRate)
	duration time.Duration
	timeout  time.Duration
	runs     []string
	attempts int
	workers  int
	ahead    time.Duration
	skipTput bool
	skipLag  bool
	cpuProf  string
	memProf  string
	target   string
	client   string // the API runs' clients: targetLean or targetNetHTTP
	bodySize int64  // --body-size: bytes of each API task's body; 0: a few bytes, {"n":i}
	blobs    string // --blobs passed to each retryd process; "": its default
	otlpSink bool   // --otlp-sink: export spans to a sink the bench runs
	// hostLimiter is --host-limiter, for the loop's scheduler and each
	// retryd process: whether attempts pass their host's limiter.
	hostLimiter bool
	// destination is --destination: whether the loop runs' tasks name a
	// destination (destSigned) or a targetUrl (destNone).
	destination string
	// env is added to the environment the loop runs read OTEL_* from and
	// to each retryd process's: the sink's endpoint with --otlp-sink.
	env []string
}

// Defaults of the flags whose default depends on the run: the API runs
// create as many tasks as users would to see a steady rate, while the
// loop keeps the figures it has always had.
const (
	defaultAPITasks  = 20000
	defaultLoopTasks = 2000
	defaultAPIRate   = 500
	defaultLoopRate  = 2000
	maxBatch         = 1000 // the batch endpoint's limit
)

// The modes of the bench, and its API runs.
const (
	modeAPI  = "api"
	modeLoop = "loop"
	modeAll  = "all"

	runSingle = "single"
	runBatch  = "batch"
	runSteady = "steady"
	runRetry  = "retry"
)

// allRuns lists the API runs; --runs picks some, made in its order.
func allRuns() []string { return []string{runSingle, runBatch, runSteady, runRetry} }

// Bench measures retryd and writes a report to stdout. By default it runs
// the API runs, then the loop's throughput run.
//
// The API runs (--mode api) measure what users see: each starts this
// binary as a separate `retryd serve` process on fresh data in the store
// --store names, and drives it only through its HTTP API, from --clients
// goroutines with a keep-alive connection each, against a loopback target
// served by the bench:
//
//   - single: --tasks tasks, one POST /retry-tasks each, flat out; tasks/s
//     from the first create until every task was answered 200 by the
//     target and counted SUCCEEDED by the API, and create latency;
//   - batch: the same in POST /retry-tasks/batch requests of --batch tasks
//     (skipped when the endpoint is missing);
//   - steady: creates paced at --rate for --duration: create latency;
//   - retry: the same paced creates, each task answered 500 once, then
//     200, under a fixed 1 s delay: the second attempt's lag behind its
//     due time.
//
// Every API run checks what the target saw against what the API
// acknowledged; a task lost or retried early fails the bench.
//
// The loop runs (--mode loop) measure the scheduler, dispatcher and store
// together, in process, with tasks created before the clock starts (see
// benchThroughput and benchLag).
func Bench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, given, err := parseBench(args, stderr)
	if err != nil {
		return err
	}
	if c.cpuProf != "" {
		f, err := os.Create(c.cpuProf)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if c.memProf != "" {
		defer writeAllocs(c.memProf, stderr)
	}
	if c.otlpSink {
		sink, err := startSink()
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(stdout, sink)
			sink.close()
		}()
		c.env = sink.env()
	}
	bs, err := openBenchStore(ctx, c)
	if err != nil {
		return err
	}
	failed := false
	defer func() { bs.close(!failed) }()

	fmt.Fprint(stdout, benchHeader(bs, c.target))
	if c.otlpSink {
		fmt.Fprintln(stdout, "tracing: every span exported over OTLP/HTTP to a sink on 127.0.0.1 answering 200")
	}
	var errs []error
	if c.mode != modeLoop {
		tasks, rate := orDefault(c.tasks, defaultAPITasks), orDefault(c.rate, defaultAPIRate)
		errs = append(errs, benchAPI(ctx, c, tasks, rate, bs, stdout))
	}
	if c.mode != modeAPI && ctx.Err() == nil {
		lc := c
		lc.tasks, lc.rate = orDefault(c.tasks, defaultLoopTasks), orDefault(c.rate, defaultLoopRate)
		// With every run, the loop adds its throughput only: the API runs
		// say what users see of lag.
		lc.skipLag = c.skipLag || (c.mode == modeAll && !given["skip-lag"])
		errs = append(errs, benchLoop(ctx, lc, bs, stdout))
	}
	fmt.Fprintf(stdout, "load average after: %s\n", loadAverages())
	err = errors.Join(errs...)
	failed = err != nil
	if failed && bs.dir != "" {
		fmt.Fprintf(stdout, "kept %s for a look (store files and retryd logs)\n", bs.dir)
	}
	return err
}

// parseBench reads the bench flags and reports which were given.
func parseBench(args []string, stderr io.Writer) (benchConfig, map[string]bool, error) {
	var c benchConfig
	fs := flag.NewFlagSet("retryd bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.mode, "mode", modeAll, "what to measure: "+modeAPI+" (through the HTTP API of a retryd process), "+
		modeLoop+" (the scheduler in process) or "+modeAll+" (the API runs, then the loop's throughput)")
	fs.StringVar(&c.store, "store", "sqlite", "the store: sqlite (a new file per run), postgres://… (a new schema per run) or redis://… (a new key prefix per run)")
	fs.StringVar(&c.dir, "dir", "", "folder in which the bench makes its own folder, for SQLite files and retryd logs (default: the temporary folder)")
	fs.IntVar(&c.clients, "clients", 8, "API runs: clients, each with its own keep-alive connection")
	fs.IntVar(&c.tasks, "tasks", 0, fmt.Sprintf("tasks of the single and batch API runs (default %d) and of the loop's throughput run (default %d)", defaultAPITasks, defaultLoopTasks))
	fs.IntVar(&c.batch, "batch", 100, fmt.Sprintf("batch API run: tasks per request (1 to %d)", maxBatch))
	fs.IntVar(&c.rate, "rate", 0, fmt.Sprintf("creates per second of the steady and retry API runs (default %d) and of the loop's lag run (default %d)", defaultAPIRate, defaultLoopRate))
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long the paced runs keep creating")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "bound on each run, from its first create until every task succeeded")
	runs := fs.String("runs", strings.Join(allRuns(), ","), "API runs to make, of "+strings.Join(allRuns(), ","))
	fs.IntVar(&c.attempts, "attempts", 10, "loop throughput run: attempts each task makes (all but the last answered 500)")
	fs.IntVar(&c.workers, "workers", scheduler.DefaultWorkers, "attempts in flight at once")
	fs.DurationVar(&c.ahead, "ahead", time.Second, "loop lag run: how far ahead of its creation each task is due")
	fs.BoolVar(&c.skipTput, "skip-throughput", false, "skip the loop's throughput run")
	fs.BoolVar(&c.skipLag, "skip-lag", false, "skip the loop's lag run (with --mode all it is skipped unless --skip-lag=false)")
	fs.StringVar(&c.target, "target", targetLean, "the loopback target: "+targetLean+" (a minimal HTTP/1.1 responder, so that the figures are retryd's) or "+targetNetHTTP+" (Go's server)")
	fs.StringVar(&c.client, "client", targetLean, "API runs: the clients' HTTP client: "+targetLean+" (fasthttp's, so that the figures are retryd's more than the clients') or "+targetNetHTTP+" (Go's)")
	fs.StringVar(&c.cpuProf, "cpuprofile", "", "write a CPU profile of the bench process (with --mode api: the clients and target only) to this `file`")
	fs.StringVar(&c.memProf, "memprofile", "", "write an allocation profile of the bench process to this `file`")
	fs.Var(byteSize{&c.bodySize}, "body-size", "API runs: each task's body is this `size` (bytes, or 64KiB, 1MiB), distinct per task (its index first); default a few bytes ({\"n\":i})")
	fs.StringVar(&c.blobs, "blobs", "", "API runs: --blobs for each retryd process (off keeps bodies inline, at most 1MiB); default retryd's own (with SQLite the embedded blob store beside the file)")
	fs.Var(onOff{&c.hostLimiter}, "host-limiter", "`on|off` (default off, as retryd's): retryd's --host-limiter, for the loop runs' scheduler and each retryd process "+
		"(the target answers 500, which is no overload, so the limiters never hold anything back: on measures what they cost)")
	fs.StringVar(&c.destination, "destination", destNone, "loop runs: "+destNone+" (tasks name a targetUrl) or "+destSigned+
		" (tasks name a destination that signs each attempt and authenticates with OAuth2 client credentials from a token endpoint the bench runs): what a destination costs")
	fs.BoolVar(&c.otlpSink, "otlp-sink", false, "export retryd's spans over OTLP/HTTP to a sink the bench runs on 127.0.0.1, which answers 200 to everything: what tracing costs (compare with runs without)")
	if err := fs.Parse(args); err != nil {
		return c, nil, usageError{err}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var bad []string
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if !slices.Contains([]string{modeAPI, modeLoop, modeAll}, c.mode) {
		bad = append(bad, fmt.Sprintf("--mode %q: want %s, %s or %s", c.mode, modeAPI, modeLoop, modeAll))
	}
	for _, name := range []string{"tasks", "rate"} {
		if given[name] && fs.Lookup(name).Value.String() == "0" {
			bad = append(bad, "--"+name+" must be positive")
		}
	}
	if c.tasks < 0 || c.rate < 0 || c.clients < 1 || c.attempts < 1 || c.workers < 1 || c.duration <= 0 || c.timeout <= 0 {
		bad = append(bad, "--tasks, --rate, --clients, --attempts, --workers, --duration and --timeout must be positive")
	}
	if c.batch < 1 || c.batch > maxBatch {
		bad = append(bad, fmt.Sprintf("--batch %d: want 1 to %d", c.batch, maxBatch))
	}
	for name, v := range map[string]string{"target": c.target, "client": c.client} {
		if v != targetLean && v != targetNetHTTP {
			bad = append(bad, fmt.Sprintf("--%s %q: want %s or %s", name, v, targetLean, targetNetHTTP))
		}
	}
	for r := range strings.SplitSeq(*runs, ",") {
		switch r = strings.TrimSpace(r); {
		case r == "":
		case slices.Contains(allRuns(), r):
			if !slices.Contains(c.runs, r) {
				c.runs = append(c.runs, r)
			}
		default:
			bad = append(bad, fmt.Sprintf("--runs: %q is not one of %s", r, strings.Join(allRuns(), ",")))
		}
	}
	if _, err := benchStoreKind(c.store); err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) > 0 {
		return c, nil, usageError{errors.New(strings.Join(bad, "; "))}
	}
	return c, given, nil
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// writeAllocs writes the allocations made so far to path, for go tool pprof
// (-sample_index=alloc_space shows where the garbage comes from).
func writeAllocs(path string, stderr io.Writer) {
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(stderr, "retryd bench: memprofile: %v\n", err)
	}
}
