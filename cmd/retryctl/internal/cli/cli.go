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
	fs.StringVar(&g.url, "url", g.url, "retryd's `URL` (env RETRYD_URL)")
	fs.StringVar(&g.token, "token", g.token, "bearer `TOKEN` (env RETRYD_TOKEN)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of tables")
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
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(env.Stdout, topUsage())
		return ExitOK
	case err != nil:
		return usageError(env, topUsage(), "%v", err)
	case top.NArg() == 0:
		fmt.Fprint(env.Stderr, topUsage())
		return ExitUsage
	}
	rest := top.Args()
	if rest[0] == "help" {
		return help(env, rest[1:])
	}
	if len(groupCommands(rest[0])) == 0 {
		return usageError(env, topUsage(), "unknown command %q", rest[0])
	}
	if len(rest) < 2 {
		return usageError(env, groupUsage(rest[0]), "%s: want a subcommand", rest[0])
	}
	if isHelp(rest[1]) {
		fmt.Fprint(env.Stdout, groupUsage(rest[0]))
		return ExitOK
	}
	cmd := findCommand(rest[0], rest[1])
	if cmd == nil {
		return usageError(env, groupUsage(rest[0]), "unknown command %q", strings.Join(rest[:2], " "))
	}
	return runCommand(ctx, cmd, g, rest[2:], env)
}

// help answers "retryctl help [GROUP [VERB]]" on stdout.
func help(env Env, args []string) int {
	var text string
	switch len(args) {
	case 0:
		text = topUsage()
	case 1:
		if len(groupCommands(args[0])) == 0 {
			return usageError(env, topUsage(), "help: unknown command %q", args[0])
		}
		text = groupUsage(args[0])
	case 2:
		cmd := findCommand(args[0], args[1])
		if cmd == nil {
			return usageError(env, topUsage(), "help: unknown command %q", strings.Join(args, " "))
		}
		text = commandUsage(cmd)
	default:
		return usageError(env, topUsage(), "help: want a command, got %q", strings.Join(args, " "))
	}
	fmt.Fprint(env.Stdout, text)
	return ExitOK
}

// runCommand parses cmd's flags and arguments and runs it.
func runCommand(ctx context.Context, cmd *command, g *globals, args []string, env Env) int {
	name := cmd.name()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if !cmd.standalone {
		g.register(fs)
	}
	run := cmd.flags(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(env.Stdout, commandUsage(cmd))
		return ExitOK
	}
	if err != nil {
		return usageError(env, commandUsage(cmd), "%s: %v", name, err)
	}
	if lo, hi := cmd.argCounts(); len(pos) < lo || len(pos) > hi {
		switch {
		case hi == 0:
			return usageError(env, commandUsage(cmd), "%s: unexpected argument %q", name, pos[0])
		case lo == hi:
			return usageError(env, commandUsage(cmd), "%s: want %d argument(s) (%s), got %d", name, hi, strings.Join(cmd.positional, " "), len(pos))
		default:
			return usageError(env, commandUsage(cmd), "%s: want %d to %d arguments (%s), got %d", name, lo, hi, strings.Join(cmd.positional, " "), len(pos))
		}
	}
	r := &runner{env: env, json: g.json}
	if !cmd.standalone {
		r.c = client.New(g.url, g.token, client.WithUserAgent("retryctl"))
	}
	if err := run(ctx, r, pos); err != nil {
		var ue *usageErr
		if errors.As(err, &ue) {
			return usageError(env, commandUsage(cmd), "%s: %s", name, ue.msg)
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

// usageError tells a command-line mistake, and the usage that would have
// avoided it, on stderr.
func usageError(env Env, usage, format string, args ...any) int {
	fmt.Fprintf(env.Stderr, "retryctl: "+format+"\n\n", args...)
	fmt.Fprint(env.Stderr, usage)
	return ExitUsage
}

// describe renders an error for a person: an API error with its field and
// every problem the service listed, after what was being done when it came.
func describe(err error) string {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	s := err.Error()
	if len(ae.Details) > 1 {
		for _, d := range ae.Details {
			s += "\n  " + d.Field + ": " + d.Message
		}
	}
	return s
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
