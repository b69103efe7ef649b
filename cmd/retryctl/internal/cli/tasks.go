package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrykit/retry/client"
)

// headerFlags collects repeated -H 'Name: value' flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("header %q: want 'Name: value'", v)
	}
	h[strings.TrimSpace(name)] = strings.TrimSpace(value)
	return nil
}

func submitFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var req client.TaskRequest
	var bodyFile, notBefore, file string
	headers := headerFlags{}
	fs.StringVar(&req.PolicyID, "policy", "", "the task's policy `ID` (default: the built-in policy \"default\")")
	fs.StringVar(&req.TargetURL, "target", "", "the `URL` to call (required without --destination)")
	fs.StringVar(&req.DestinationID, "destination", "", "send to destination `ID`: its url followed by --path")
	fs.StringVar(&req.Path, "path", "", "with --destination, the `PATH` after its url (/orders, ?id=7)")
	fs.StringVar(&req.Method, "method", "", "HTTP `METHOD` (default POST)")
	fs.Var(headers, "H", "a header `'Name: value'` (repeatable)")
	fs.Var(headers, "header", "a header `'Name: value'` (repeatable)")
	fs.StringVar(&req.Body, "body", "", "the request body, as `TEXT`")
	fs.StringVar(&bodyFile, "body-file", "", "read the body from `FILE` (- for stdin); bytes that are not UTF-8 are sent as bodyBase64")
	fs.StringVar(&req.BodyRef, "body-ref", "", "the body by reference: `s3://BUCKET/KEY` of an object you uploaded, which retryd reads at each attempt")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "the idempotency `KEY` (generated when absent)")
	fs.StringVar(&notBefore, "not-before", "", "hold the first attempt until `TIME`: RFC 3339, epoch milliseconds, or a duration from now (90s, 2h)")
	fs.StringVar(&file, "file", "", "submit the tasks of a JSON Lines `FILE` (- for stdin), one task object per line")
	return func(ctx context.Context, r *runner, _ []string) error {
		if file != "" {
			var set []string
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "file", "url", "token", "json":
				default:
					set = append(set, "--"+f.Name)
				}
			})
			if len(set) > 0 {
				return usagef("--file takes every task from the file; drop %s", strings.Join(set, " "))
			}
			return r.submitFile(ctx, file)
		}
		// No --policy is the service's built-in policy "default".
		switch {
		case req.DestinationID == "" && req.TargetURL == "":
			return usagef("--target is required, or --destination")
		case req.DestinationID == "" && req.Path != "":
			return usagef("--path needs --destination")
		case req.Path != "" && req.TargetURL != "":
			return usagef("give --path or --target, not both: --target is the whole URL")
		}
		if notBefore != "" {
			at, err := parseWhen(notBefore, time.Now())
			if err != nil {
				return usagef("--not-before: %v", err)
			}
			req.NotBefore = client.MillisOf(at)
		}
		if n := btoi(req.Body != "") + btoi(bodyFile != "") + btoi(req.BodyRef != ""); n > 1 {
			return usagef("give one of --body, --body-file and --body-ref")
		}
		if bodyFile != "" {
			b, err := r.readFile(bodyFile)
			if err != nil {
				return err
			}
			if utf8.Valid(b) {
				req.Body = string(b)
			} else {
				req.BodyBase64 = b
			}
		}
		if len(headers) > 0 {
			req.Headers = headers
		}
		t, created, err := r.c.CreateTask(ctx, req)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(t)
		}
		if !created {
			fmt.Fprintf(r.env.Stdout, "task %s already exists with idempotency key %s (a repeat of the same request)\n", t.TaskID, t.IdempotencyKey)
		}
		return r.printTask(t)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseWhen reads a time given on the command line: RFC 3339
// (2030-01-02T15:04:05Z), epoch milliseconds, or a duration from now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q is in the past; a duration counts from now", s)
		}
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (2030-01-02T15:04:05Z), epoch milliseconds, or a duration (90s, 2h)", s)
}

// readFile reads path, or stdin for "-".
func (r *runner) readFile(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(r.env.Stdin)
	}
	return os.ReadFile(path)
}

func taskGet(ctx context.Context, r *runner, args []string) error {
	return r.showTask(r.c.GetTask(ctx, args[0]))
}

func (r *runner) showTask(t *client.Task, err error) error {
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(t)
	}
	return r.printTask(t)
}

// pageFlags registers --limit and --page-token.
func pageFlags(fs *flag.FlagSet, o *client.ListOptions) {
	fs.IntVar(&o.Limit, "limit", 0, "`N` items per page (default 100, at most 1000)")
	fs.StringVar(&o.PageToken, "page-token", "", "the `TOKEN` printed after the previous page")
}

func taskListFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var q client.TaskQuery
	var statuses string
	fs.StringVar(&statuses, "status", "", "only tasks in these states `S,…` (PENDING, IN_FLIGHT, SUCCEEDED, EXHAUSTED, FAILED, CANCELLED)")
	fs.StringVar(&q.PolicyID, "policy", "", "only tasks of policy `ID`")
	fs.StringVar(&q.TargetHost, "target-host", "", "only tasks whose target is `HOST[:PORT]`, as in its URL")
	fs.StringVar(&q.DestinationID, "destination", "", "only tasks of destination `ID`")
	fs.StringVar(&q.IdempotencyKey, "idempotency-key", "", "only the task of this idempotency `KEY`")
	fs.StringVar(&q.Cause, "cause", "", "only dead letters of this `CAUSE`, as dead-letters causes names it (\"HTTP 503\", timeout, …)")
	pageFlags(fs, &q.ListOptions)
	return func(ctx context.Context, r *runner, _ []string) error {
		q.Statuses = parseStatuses(statuses)
		return r.showTasks(r.c.ListTasks(ctx, q))
	}
}

func deadLetterListFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var o client.ListOptions
	var policy string
	fs.StringVar(&policy, "policy", "", "only dead letters of policy `ID`")
	pageFlags(fs, &o)
	return func(ctx context.Context, r *runner, _ []string) error {
		return r.showTasks(r.c.ListDeadLetters(ctx, policy, o))
	}
}

func (r *runner) showTasks(page *client.Page[client.Task], err error) error {
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(page)
	}
	return r.printTasks(page)
}

func attemptsFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var o client.ListOptions
	pageFlags(fs, &o)
	return func(ctx context.Context, r *runner, args []string) error {
		page, err := r.c.ListAttempts(ctx, args[0], o)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(page)
		}
		return r.printAttempts(page)
	}
}
