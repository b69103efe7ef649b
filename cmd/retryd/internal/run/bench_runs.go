package run

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

func benchThroughput(ctx context.Context, c benchConfig, tg *target, sc Config, out io.Writer) error {
	r, err := newRig(ctx, sc, c.workers, benchPolicy(c.attempts), c.destination)
	if err != nil {
		return err
	}
	defer r.close()
	// The scheduler starts once every task is stored and due, so that
	// creation and dispatch are timed apart; its start-up (rebuilding the
	// heap from the store) is part of the timed run.
	t0 := time.Now()
	if err := r.createTasks(ctx, "http://"+tg.addr+"/tput", c.tasks, func(int) time.Time { return t0 }); err != nil {
		return err
	}
	created := time.Since(t0)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	use := startUsage()
	go func() { done <- r.sched.Run(runCtx) }()
	err = r.rec.waitTerminal(ctx, int64(c.tasks))
	elapsed := time.Since(start)
	n := r.rec.attempts.Load()
	cost := use.perOp(n, "attempt")
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loop throughput: %d tasks created in %v (%.0f/s); %d attempts (%d per task, durable claim + call + finish each) in %v = %.0f attempts/s%s\n",
		c.tasks, created.Round(time.Millisecond), float64(c.tasks)/created.Seconds(),
		n, c.attempts, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), cost)
	return nil
}

func benchLag(ctx context.Context, c benchConfig, tg *target, sc Config, out io.Writer) error {
	r, err := newRig(ctx, sc, c.workers, benchPolicy(1), c.destination)
	if err != nil {
		return err
	}
	defer r.close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	use := startUsage()
	go func() { done <- r.sched.Run(runCtx) }()

	total := int(float64(c.rate) * c.duration.Seconds())
	interval := time.Second / time.Duration(c.rate)
	// Each task is due c.ahead after the moment it is meant to be created;
	// creation is paced by its due time, 64 at a time.
	start := time.Now().Add(50 * time.Millisecond)
	due := func(i int) time.Time { return start.Add(c.ahead + time.Duration(i)*interval) }
	paced := func(i int) time.Time {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		return due(i)
	}
	if err := r.createTasks(ctx, "http://"+tg.addr+"/lag", total, paced); err != nil {
		return err
	}
	err = r.rec.waitTerminal(ctx, int64(total))
	// Creating the tasks is part of this run's cost.
	cost := use.perOp(int64(total), "task")
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	lags := slices.Clone(r.rec.lags)
	slices.Sort(lags)
	q := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	fmt.Fprintf(out, "loop lag: %d tasks, %d due per second for %v, each due %v after creation: dispatch lag (attempt start - due time) p50 %v, p99 %v, max %v%s\n",
		total, c.rate, c.duration, c.ahead, round(q(0.50)), round(q(0.99)), round(lags[len(lags)-1]), cost)
	return nil
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}
