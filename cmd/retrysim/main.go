// Command retrysim simulates what retry strategies do to the server they
// retry against: contention on one row (occ), a crowd retrying through an
// outage (outage), and retries multiplied through layers of services
// (amplification). Run "retrysim help" for the flags.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
