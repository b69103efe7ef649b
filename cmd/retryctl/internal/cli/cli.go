// Package cli is retryctl: its commands, flags and output. Run is the whole
// program, so tests drive it as a user would, against a real server.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/retrykit/retry/client"
)

// DefaultURL is where retryctl finds retryd when neither --url nor
// RETRYD_URL says.
const DefaultURL = "http://127.0.0.1:8080"

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the request failed or the service refused it
	ExitUsage = 2 // the command line is wrong
)

// Env is what Run reads and writes besides its arguments.
type Env struct {
	Getenv func(string) string // RETRYD_URL, RETRYD_TOKEN
	Stdin  io.Reader           // for --file - and --body-file -
	Stdout io.Writer
	Stderr io.Writer
}

const usage = `retryctl talks to retryd.

Usage: retryctl [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]

Commands:
  tasks submit --policy ID --target URL [--method M] [-H 'Name: value']...
               [--body TEXT | --body-file FILE|- | --body-ref s3://BUCKET/KEY]
               [--idempotency-key KEY]
               [--not-before TIME]   first attempt not before TIME: RFC 3339,
                                     epoch ms, or a duration from now (90s, 2h)
  tasks submit --file TASKS.jsonl|-  one task object per line, as POST /retry-tasks
               takes it; sent 1,000 at a time; prints what was created, repeated
               and refused (each refused line with its error); exit 1 if any was
  tasks get TASK_ID
  tasks list [--status S[,S…]] [--policy ID] [--limit N] [--page-token T]
  tasks cancel TASK_ID
  tasks attempts TASK_ID [--limit N] [--page-token T]
  policies put POLICY_ID [--spec JSON | --file FILE|-]
  policies get POLICY_ID
  policies list [--limit N] [--page-token T]
  dead-letters list [--policy ID] [--limit N] [--page-token T]
  dead-letters redrive TASK_ID
  kafka replay --topic T [--brokers H:P,…] [--to main|retry] [--tiers N]
               [--since T] [--until T] [--error-type TYPE] [--dry-run]
               republish a Kafka consumer's dead letters (T-dlq); -h for details

Global flags (also accepted after the command):
  --url URL      retryd's address (env RETRYD_URL, default ` + DefaultURL + `)
  --token TOKEN  bearer token (env RETRYD_TOKEN)
  --json         print the API's JSON instead of tables

Exit status: 0 on success, 1 when a request fails, 2 for a bad command line.
`

// command is one "group verb" of retryctl.
type command struct {
	group, verb string
	positional  []string // names of the required arguments
	flags       func(fs *flag.FlagSet) func(ctx context.Context, r *runner, args []string) error
}

func commands() []command {
	return []command{
		{"tasks", "submit", nil, submitFlags},
		{"tasks", "get", []string{"TASK_ID"}, noFlags(taskGet)},
		{"tasks", "list", nil, taskListFlags},
		{"tasks", "cancel", []string{"TASK_ID"}, noFlags(taskCancel)},
		{"tasks", "attempts", []string{"TASK_ID"}, attemptsFlags},
		{"policies", "put", []string{"POLICY_ID"}, policyPutFlags},
		{"policies", "get", []string{"POLICY_ID"}, noFlags(policyGet)},
		{"policies", "list", nil, policyListFlags},
		{"dead-letters", "list", nil, deadLetterListFlags},
		{"dead-letters", "redrive", []string{"TASK_ID"}, noFlags(redrive)},
	}
}

// kafkaReplay republishes a Kafka dead-letter topic; it talks to the
// brokers, not to retryd, so the global flags do not apply.
func kafkaReplay(ctx context.Context, args []string, env Env) int {
	err := kafkaReplayCommand(ctx, args, env.Stdout)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	}
	fmt.Fprintf(env.Stderr, "retryctl: %v\n", err)
	return ExitError
}

// runner carries what every command needs once the flags are parsed.
type runner struct {
	c    *client.Client
	env  Env
	json bool
}

type globals struct {
	url, token string
	json       bool
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "retryd's address")
	fs.StringVar(&g.token, "token", g.token, "bearer token")
	fs.BoolVar(&g.json, "json", g.json, "print JSON")
}

// Run runs retryctl with args (the program name left out) and returns its
// exit status.
func Run(ctx context.Context, args []string, env Env) int {
	g := &globals{url: env.Getenv("RETRYD_URL"), token: env.Getenv("RETRYD_TOKEN")}
	if g.url == "" {
		g.url = DefaultURL
	}
	top := flag.NewFlagSet("retryctl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	err := top.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp) || err == nil && top.Arg(0) == "help":
		fmt.Fprint(env.Stdout, usage)
		return ExitOK
	case err != nil:
		return usageError(env, "%v", err)
	case top.NArg() == 0:
		fmt.Fprint(env.Stderr, usage)
		return ExitUsage
	}
	rest := top.Args()
	if len(rest) < 2 {
		return usageError(env, "%s: want a subcommand", rest[0])
	}
	if rest[0] == "kafka" && rest[1] == "replay" {
		return kafkaReplay(ctx, rest[2:], env)
	}
	var cmd *command
	for _, c := range commands() {
		if c.group == rest[0] && c.verb == rest[1] {
			cmd = &c
		}
	}
	if cmd == nil {
		return usageError(env, "unknown command %q", strings.Join(rest[:2], " "))
	}
	name := cmd.group + " " + cmd.verb
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	run := cmd.flags(fs)
	pos, err := parseInterspersed(fs, rest[2:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(env.Stdout, usage)
		return ExitOK
	}
	if err != nil {
		return usageError(env, "%s: %v", name, err)
	}
	if len(pos) != len(cmd.positional) {
		return usageError(env, "%s: want %d argument(s) (%s), got %d", name, len(cmd.positional), strings.Join(cmd.positional, " "), len(pos))
	}
	r := &runner{c: client.New(g.url, g.token, client.WithUserAgent("retryctl")), env: env, json: g.json}
	if err := run(ctx, r, pos); err != nil {
		var ue *usageErr
		if errors.As(err, &ue) {
			return usageError(env, "%s: %s", name, ue.msg)
		}
		fmt.Fprintln(env.Stderr, "retryctl:", describe(err))
		return ExitError
	}
	return ExitOK
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, which the flag package alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// usageErr is a command-line mistake found after flag parsing.
type usageErr struct{ msg string }

func (e *usageErr) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageErr{fmt.Sprintf(format, args...)} }

func usageError(env Env, format string, args ...any) int {
	fmt.Fprintf(env.Stderr, "retryctl: "+format+"\n", args...)
	fmt.Fprintln(env.Stderr, `run "retryctl help" for the commands`)
	return ExitUsage
}

// describe renders an error for a person: an API error with its field and
// every problem the service listed.
func describe(err error) string {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	s := ae.Error()
	if len(ae.Details) > 1 {
		for _, d := range ae.Details {
			s += "\n  " + d.Field + ": " + d.Message
		}
	}
	return s
}

func noFlags(run func(ctx context.Context, r *runner, args []string) error) func(*flag.FlagSet) func(context.Context, *runner, []string) error {
	return func(*flag.FlagSet) func(context.Context, *runner, []string) error { return run }
}

// printJSON writes v as indented JSON.
func (r *runner) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(r.env.Stdout, "%s\n", b)
	return err
}
