// Command retryctl is the command-line client of retryd: submit, watch and
// cancel retry tasks, register and preview policies, keep destinations
// (create, change, pause, rotate their signing secrets), count dead letters
// by cause and redrive them, one or in bulk. Run "retryctl help" for its
// commands, "retryctl COMMAND --help" for one. It reads RETRYD_URL (default
// http://127.0.0.1:8080) and RETRYD_TOKEN.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Run(ctx, os.Args[1:], cli.Env{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
