package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// benchAPI makes the API runs c.runs names, each against its own retryd
// process on fresh data, and reports each. It returns an error naming
// every run that failed or found a task lost or retried early.
func benchAPI(ctx context.Context, c benchConfig, tasks, rate int, bs *benchStore, out io.Writer) error {
	paced := max(1, int(float64(rate)*c.duration.Seconds()))
	fmt.Fprintf(out, "api runs: %d clients (%s), each one keep-alive connection; a new retryd process per run: serve --listen 127.0.0.1:<free port> --allow-target 127.0.0.1/32 --workers %d\n",
		c.clients, c.client, c.workers)
	if c.bodySize > 0 || c.blobs != "" {
		fmt.Fprintf(out, "api bodies: %s each (distinct per task); retryd --blobs %s\n", sizeString(c.bodySize), orWord(c.blobs, "(its default)"))
	}
	var errs []error
	for _, name := range c.runs {
		if ctx.Err() != nil {
			break
		}
		var err error
		switch name {
		case runSingle:
			err = apiRunOne(ctx, c, bs, out, name, tasks, 1, nil, driveSingle, reportSingle)
		case runBatch:
			err = apiRunOne(ctx, c, bs, out, name, tasks, 1, probeBatch, driveBatch, reportBatch)
		case runSteady:
			err = apiRunOne(ctx, c, bs, out, name, paced, 1, nil, pacedDriver(rate), reportSteady(rate))
		case runRetry:
			err = apiRunOne(ctx, c, bs, out, name, paced, 2, nil, pacedDriver(rate), reportRetry(rate))
		}
		if err != nil {
			fmt.Fprintf(out, "  FAILED: %v\n", err)
			errs = append(errs, fmt.Errorf("api %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// apiRun is one API run: a retryd process on fresh data, a target that
// answers 500 until each task's fail-th attempt, and what the clients and
// the target saw.
type apiRun struct {
	name string
	c    benchConfig
	n    int // tasks the run means to create
	tg   *target
	proc *retrydProc
	mon  *apiClient // the bench's own connection, for /metrics
	url  string     // the tasks' targetUrl
	pad  string     // with --body-size: the bytes after each body's index

	// Per task i, written only by the client that creates it.
	keys []string
	code []int32 // the API's answer: 201 created, 200 a repeat, another status, codeNoAnswer, or 0: not sent
	sent []int64 // when its create was sent, on the target's clock

	// Per create request (a task, or a batch), written likewise.
	lat []time.Duration

	errs errSample

	// Paced runs: how far behind its slot each create was sent. Clients
	// wait for their answers, so a slow answer delays the creates after
	// it: this says whether the rate was held.
	behind []time.Duration

	// Set by apiRunOne once the run is over.
	start, createsDone, done time.Time
	retrydCPU                time.Duration // -1 when unknown
	benchCost                string
	machineBusy              string // machineUse.since over the run
	verdict                  verdict
}

// codeNoAnswer marks a create that got no HTTP answer.
const codeNoAnswer = -1

type (
	// prober decides before the clock starts whether a run can be made; a
	// non-empty skip says why not.
	prober func(ctx context.Context, r *apiRun) (skip string, err error)
	// driver makes the run's creates, recording each in r.
	driver func(ctx context.Context, r *apiRun) error
	// reporter writes the run's figures.
	reporter func(out io.Writer, r *apiRun)
)

// apiRunOne makes one API run, reports it, and cleans up after it.
func apiRunOne(ctx context.Context, c benchConfig, bs *benchStore, out io.Writer, name string, n, fail int,
	probe prober, drive driver, report reporter) (err error) {
	r := &apiRun{name: name, c: c, n: n, keys: make([]string, n), code: make([]int32, n), sent: make([]int64, n)}
	if c.bodySize > 0 {
		r.pad = strings.Repeat("x", int(c.bodySize))
	}
	for i := range r.keys {
		r.keys[i] = fmt.Sprintf("%s-%07d", name, i)
	}
	if r.tg, err = startTarget(c.target, fail); err != nil {
		return err
	}
	defer r.tg.Close()
	r.url = "http://" + r.tg.addr + "/" + name
	data, err := bs.fresh(ctx, name)
	if err != nil {
		return err
	}
	defer func() {
		if derr := data.drop(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	logPath := filepath.Join(bs.dir, name+"-retryd.log")
	args := append(data.args(), "--host-limiter", onOff{&c.hostLimiter}.String())
	if c.blobs != "" {
		args = append(args, "--blobs", c.blobs)
	}
	if r.proc, err = startRetryd(ctx, args, c.env, c.workers, logPath); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if stopped {
			return
		}
		if serr := r.proc.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	r.mon = newAPIClient(r.proc.addr, c.client)
	defer r.mon.close()
	if err := r.mon.registerPolicy(ctx); err != nil {
		return err
	}
	if probe != nil {
		skip, err := probe(ctx, r)
		if err != nil {
			return err
		}
		if skip != "" {
			fmt.Fprintf(out, "api %s: skipped: %s\n", name, skip)
			return nil
		}
	}

	runCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cpu0, cpuOK := r.proc.cpu()
	use, machine := startUsage(), startMachineUse()
	r.start = time.Now()
	derr := drive(runCtx, r)
	r.createsDone = time.Now()
	werr := r.waitDone(runCtx)
	r.done = time.Now()
	r.retrydCPU = -1
	if cpu1, ok := r.proc.cpu(); ok && cpuOK {
		r.retrydCPU = cpu1 - cpu0
	}
	r.benchCost = use.cost(int64(r.n))
	r.machineBusy = machine.since()
	r.verdict = r.check(ctx)
	if derr == nil && werr != nil {
		derr = fmt.Errorf("waiting for every task to succeed: %w", werr)
	}
	if errors.Is(derr, context.DeadlineExceeded) && ctx.Err() == nil {
		derr = fmt.Errorf("did not finish within --timeout %v: %w", c.timeout, derr)
	}
	report(out, r)
	fmt.Fprintf(out, "  %s\n", r.costLine())
	fmt.Fprintf(out, "  correctness: %s\n", r.verdict)
	for _, m := range r.errs.list() {
		fmt.Fprintf(out, "  error: %s\n", m)
	}
	if c.bodySize > 0 {
		reqs, got := r.tg.requests.Load(), r.tg.bodyBytes.Load()
		fmt.Fprintf(out, "  bodies: the target read %d bytes in %d requests", got, reqs)
		if got != reqs*c.bodySize {
			fmt.Fprintf(out, ": MISMATCH, want %d a request\n", c.bodySize)
			derr = errors.Join(derr, fmt.Errorf("the target read %d body bytes in %d requests, want %d each", got, reqs, c.bodySize))
		} else {
			fmt.Fprintf(out, ", %d each as sent\n", c.bodySize)
		}
	}
	if bs.kind == "sqlite" {
		// Stopped, retryd closes its database, which checkpoints the WAL
		// into the file: the sizes are then what the tasks take at rest.
		stopped = true
		if serr := r.proc.stop(); serr != nil {
			derr = errors.Join(derr, serr)
		} else {
			fmt.Fprintf(out, "  %s\n", storeSizeLine(data.store, r.acked()))
		}
	}
	if derr == nil {
		derr = r.verdict.err()
	}
	if derr != nil {
		return fmt.Errorf("%w (retryd's log: %s)", derr, logPath)
	}
	return nil
}

// waitDone waits until the target has answered 200 for every task the API
// acknowledged, then until the API counts as many SUCCEEDED. The target is
// watched first because that costs retryd nothing; /metrics is polled
// only for the last commits.
func (r *apiRun) waitDone(ctx context.Context) error {
	acked := int64(r.acked())
	if err := r.tg.waitDelivered(ctx, acked); err != nil {
		return err
	}
	for {
		counts, err := r.mon.taskCounts(ctx)
		if err == nil && counts["SUCCEEDED"] >= acked {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (r *apiRun) acked() int {
	n := 0
	for _, code := range r.code {
		if code == 201 {
			n++
		}
	}
	return n
}

// costLine is the CPU time each task cost retryd and the bench, and how
// busy the machine's CPUs were (store servers and all).
func (r *apiRun) costLine() string {
	wall := r.done.Sub(r.start)
	s := "CPU per task: retryd "
	if r.retrydCPU < 0 || r.n == 0 {
		s += "unknown (no /proc)"
	} else {
		s += fmt.Sprintf("%.0f µs (%.2f cores)", float64(r.retrydCPU.Microseconds())/float64(r.n), r.retrydCPU.Seconds()/wall.Seconds())
	}
	return s + ", bench (clients and target) " + r.benchCost + r.machineBusy
}

// errSample keeps the first few error messages of a run and counts all.
type errSample struct {
	mu   sync.Mutex
	n    int
	msgs []string
}

func (e *errSample) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.msgs) < 5 {
		e.msgs = append(e.msgs, strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
}

func (e *errSample) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append([]string(nil), e.msgs...)
	if e.n > len(e.msgs) {
		out = append(out, fmt.Sprintf("and %d more", e.n-len(e.msgs)))
	}
	return out
}
