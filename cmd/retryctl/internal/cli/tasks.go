package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
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
	var bodyFile string
	headers := headerFlags{}
	fs.StringVar(&req.PolicyID, "policy", "", "the task's policy ID (required)")
	fs.StringVar(&req.TargetURL, "target", "", "the URL to call (required)")
	fs.StringVar(&req.Method, "method", "", "HTTP method (default POST)")
	fs.Var(headers, "H", "a header 'Name: value' (repeatable)")
	fs.Var(headers, "header", "a header 'Name: value' (repeatable)")
	fs.StringVar(&req.Body, "body", "", "the request body, as text")
	fs.StringVar(&bodyFile, "body-file", "", "read the body from a file (- for stdin); bytes that are not UTF-8 are sent as bodyBase64")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "the idempotency key (generated when absent)")
	return func(ctx context.Context, r *runner, _ []string) error {
		if req.PolicyID == "" || req.TargetURL == "" {
			return usagef("--policy and --target are required")
		}
		if bodyFile != "" {
			if req.Body != "" {
				return usagef("give --body or --body-file, not both")
			}
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

func taskCancel(ctx context.Context, r *runner, args []string) error {
	return r.showTask(r.c.CancelTask(ctx, args[0]))
}

func redrive(ctx context.Context, r *runner, args []string) error {
	return r.showTask(r.c.RedriveTask(ctx, args[0]))
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
	fs.IntVar(&o.Limit, "limit", 0, "items per page (default 100, at most 1000)")
	fs.StringVar(&o.PageToken, "page-token", "", "the token printed after the previous page")
}

func taskListFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var q client.TaskQuery
	var statuses string
	fs.StringVar(&statuses, "status", "", "only tasks in these states, comma-separated (PENDING, IN_FLIGHT, SUCCEEDED, EXHAUSTED, FAILED, CANCELLED)")
	fs.StringVar(&q.PolicyID, "policy", "", "only tasks of this policy")
	pageFlags(fs, &q.ListOptions)
	return func(ctx context.Context, r *runner, _ []string) error {
		for s := range strings.SplitSeq(statuses, ",") {
			if s = strings.TrimSpace(s); s != "" {
				q.Statuses = append(q.Statuses, client.Status(strings.ToUpper(s)))
			}
		}
		return r.showTasks(r.c.ListTasks(ctx, q))
	}
}

func deadLetterListFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var o client.ListOptions
	var policy string
	fs.StringVar(&policy, "policy", "", "only dead letters of this policy")
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
