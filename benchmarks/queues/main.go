// Command queues measures River and asynq on the work `retryd bench --mode
// api --runs single` gives retryd, so that the three can be read side by
// side, on the same machine, in the same hour: n tasks, each an HTTP POST
// to a target on 127.0.0.1 that answers 200, enqueued one at a time by 8
// client goroutines through each system's own insert call (no HTTP: they
// run in process), worked by each system's workers with Go's HTTP client,
// as their users write them. The clock runs from the first insert until
// the target has answered every task and the system has recorded every one
// as done (River: the job rows completed; asynq: its queue's processed
// count), as retryd bench's does.
//
//	go run ./queues --system river --pg postgres://postgres@127.0.0.1:5432/test
//	go run ./queues --system asynq --redis 127.0.0.1:6379
//
// River runs in a schema of its own, dropped after; asynq in a queue of its
// own, deleted after. Both are tuned as in issue 11: River's FetchCooldown
// and FetchPollInterval 1 ms, asynq's task check intervals 1 ms.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "queues:", err)
		os.Exit(1)
	}
}

// config is what one run measures.
type config struct {
	system  string
	pg      string
	redis   string
	tasks   int
	clients int
	workers int
	timeout time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("queues", flag.ContinueOnError)
	fs.StringVar(&c.system, "system", "river", "river or asynq")
	fs.StringVar(&c.pg, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "River's PostgreSQL")
	fs.StringVar(&c.redis, "redis", "127.0.0.1:6379", "asynq's Redis (host:port)")
	fs.IntVar(&c.tasks, "tasks", 20000, "tasks to enqueue")
	fs.IntVar(&c.clients, "clients", 8, "goroutines enqueueing, one task at a time each")
	fs.IntVar(&c.workers, "workers", 512, "tasks worked at once (retryd bench's --workers default)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "bound on the run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.tasks < 1 || c.clients < 1 || c.workers < 1 {
		return errors.New("--tasks, --clients and --workers must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	tg, err := startTarget(c.tasks)
	if err != nil {
		return err
	}
	defer tg.close()
	var sys system
	switch c.system {
	case "river":
		sys, err = newRiver(ctx, c, tg.url)
	case "asynq":
		sys, err = newAsynq(ctx, c, tg.url)
	default:
		return fmt.Errorf("--system %q: want river or asynq", c.system)
	}
	if err != nil {
		return err
	}
	defer sys.close()
	r, err := measure(ctx, c, sys, tg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d tasks, one insert each from %d clients: %.0f tasks/s end to end (%.3fs from the first insert until the target had answered 200 for every task and %s recorded every one done; the inserts alone took %.3fs)\n",
		c.system, c.tasks, c.clients, float64(c.tasks)/r.total.Seconds(), r.total.Seconds(), c.system, r.inserts.Seconds())
	fmt.Fprintf(out, "  insert latency p50 %v, p99 %v, max %v\n", r.p50, r.p99, r.max)
	fmt.Fprintf(out, "  correctness: %d inserted, %d answered 200 by the target, %d duplicates, %d lost\n",
		c.tasks, tg.distinct(), tg.duplicates(), c.tasks-tg.distinct())
	if tg.distinct() != c.tasks {
		return fmt.Errorf("%d tasks never reached the target", c.tasks-tg.distinct())
	}
	return nil
}
