package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"go.opentelemetry.io/otel"
)

// Command names the subcommand Main runs for args: "bench", "migrate",
// "secrets", or "serve", which is also what no subcommand (flags alone)
// means.
func Command(args []string) string {
	if len(args) > 0 && (args[0] == "bench" || args[0] == "migrate" || args[0] == "secrets") {
		return args[0]
	}
	return "serve"
}

// Main runs retryd with args (without the program name) and returns the
// exit code: 0, 1 for a failure, 2 for bad usage. getenv supplies the
// RETRYD_* fallbacks; logs and reports go to stdout, usage and startup
// errors to stderr. SIGINT and SIGTERM stop it gracefully.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := Command(args)
	if len(args) > 0 && args[0] == cmd {
		args = args[1:]
	}
	switch cmd {
	case "bench":
		return exitCode(Bench(ctx, args, getenv, stdout, stderr), stderr)
	case "migrate":
		return exitCode(Migrate(ctx, args, getenv, stdout, stderr), stderr)
	case "secrets":
		return exitCode(Secrets(ctx, args, getenv, stdout, stderr), stderr)
	}
	var c Config
	fs := newFlagSet("retryd", &c, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: retryd [serve] [flags]\n       retryd migrate [flags]\n       retryd bench [flags]\n       retryd secrets rotate-key [flags]\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(stderr, usageFooter)
	}
	if err := parse(fs, args, getenv); err != nil {
		return exitCode(usageError{err}, stderr)
	}
	c.Getenv = getenv
	log, err := newLogger(stdout, c.LogFormat, c.LogLevel)
	if err != nil {
		return exitCode(usageError{err}, stderr)
	}
	// The OpenTelemetry SDK reports what goes wrong (a collector that
	// cannot be reached) to its process-wide handler: retryd's log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: the OpenTelemetry SDK failed", "error", err)
	}))
	if err := Serve(ctx, c, log, nil); err != nil {
		log.Error("retryd: " + err.Error())
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "retryd:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// newLogger returns a slog.Logger writing text or JSON to w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
