// Command retryd is the durable retry service: it takes retry tasks over
// HTTP, keeps them in a store, and calls their targets on schedule until
// they succeed or their policy gives up. "retryd" serves; "retryd bench"
// measures it; "retryd -h" lists the flags and their RETRYD_* variables.
package main

import (
	"os"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

func main() {
	os.Exit(run.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
