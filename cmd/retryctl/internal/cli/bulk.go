package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/retrykit/retry/client"
)

// bulkFlags are the filters of a bulk redrive or cancel.
type bulkFlags struct {
	statuses string
	all      bool
	f        client.BulkFilter
}

// register adds the flags to fs: what names the tasks in their usage,
// states those --status may name; causes is whether --cause applies (only
// dead letters have one).
func (b *bulkFlags) register(fs *flag.FlagSet, what, states string, causes bool) {
	fs.StringVar(&b.statuses, "status", "", "only "+what+" in the states `S,…`, comma-separated ("+states+")")
	fs.StringVar(&b.f.PolicyID, "policy", "", "only "+what+" of policy `ID`")
	fs.StringVar(&b.f.TargetHost, "target-host", "", "only "+what+" whose target is `HOST[:PORT]`, as in its URL")
	if causes {
		fs.StringVar(&b.f.Cause, "cause", "", "only "+what+" of this `CAUSE`, as dead-letters causes names it (\"HTTP 503\", timeout, …)")
	}
	fs.BoolVar(&b.all, "all", false, "all the "+what+": no filter (a bulk run without one is refused)")
}

// filter returns the filter the flags give, whether any flag asked for a
// bulk run at all, or a usage error: a bulk run needs a filter or --all,
// not both, so that a forgotten filter never acts on every task.
func (b *bulkFlags) filter(filters string) (f client.BulkFilter, bulk bool, err error) {
	f = b.f
	f.Statuses = parseStatuses(b.statuses)
	filtered := len(f.Statuses) > 0 || f.PolicyID != "" || f.TargetHost != "" || f.Cause != ""
	if filtered && b.all {
		return f, true, usagef("--all is every task; drop it or the filters (%s)", filters)
	}
	return f, filtered || b.all, nil
}

// parseStatuses reads "--status pending,failed".
func parseStatuses(s string) []client.Status {
	var out []client.Status
	for s := range strings.SplitSeq(s, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, client.Status(strings.ToUpper(s)))
		}
	}
	return out
}

// oneOrBulk runs one of a command that acts on TASK_ID or on every task of
// a filter: one with the argument, bulk without it.
func oneOrBulk(args []string, b *bulkFlags, filters string,
	one func(id string) error, bulk func(client.BulkFilter) error) error {
	f, isBulk, err := b.filter(filters)
	switch {
	case err != nil:
		return err
	case len(args) == 1 && isBulk:
		return usagef("give TASK_ID or filters (%s, --all), not both", filters)
	case len(args) == 1:
		return one(args[0])
	case !isBulk:
		return usagef("give TASK_ID, filters (%s), or --all for every task", filters)
	}
	return bulk(f)
}

// runBulk calls run (RedriveAll or CancelAll) with progress on stderr and
// prints the total, also when run failed part way: what was done is done.
func (r *runner) runBulk(ctx context.Context, verb string, f client.BulkFilter,
	run func(context.Context, client.BulkFilter, func(int)) (int, error)) error {
	p := newProgress(r.env.Stderr, verb)
	p.start()
	n, err := run(ctx, f, p.report)
	p.end()
	if r.json {
		if jerr := r.printJSON(map[string]int{"count": n}); jerr != nil {
			return jerr
		}
	} else {
		fmt.Fprintf(r.env.Stdout, "%s %d task(s)\n", verb, n)
	}
	if err != nil {
		return fmt.Errorf("%s %d task(s), then: %w", verb, n, err)
	}
	return nil
}

func taskCancelFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var b bulkFlags
	b.register(fs, "tasks", "PENDING, the default", false)
	return func(ctx context.Context, r *runner, args []string) error {
		return oneOrBulk(args, &b, "--status, --policy, --target-host",
			func(id string) error { return r.showTask(r.c.CancelTask(ctx, id)) },
			func(f client.BulkFilter) error { return r.runBulk(ctx, "cancelled", f, r.c.CancelAll) })
	}
}

func redriveFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var b bulkFlags
	b.register(fs, "dead letters", "EXHAUSTED, FAILED; both by default", true)
	return func(ctx context.Context, r *runner, args []string) error {
		return oneOrBulk(args, &b, "--cause, --status, --policy, --target-host",
			func(id string) error { return r.showTask(r.c.RedriveTask(ctx, id)) },
			func(f client.BulkFilter) error { return r.runBulk(ctx, "redriven", f, r.c.RedriveAll) })
	}
}
