package run_test

import (
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

// Command is what main asks to decide whether the process serves (and so
// gets the heap headroom): it must agree with the subcommand Main runs.
func TestCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "serve"},
		{[]string{"serve", "--listen", "127.0.0.1:0"}, "serve"},
		{[]string{"--store", "bench"}, "serve"}, // a flag's value is no subcommand
		{[]string{"bench", "--runs", "single"}, "bench"},
		{[]string{"migrate"}, "migrate"},
	} {
		if got := run.Command(c.args); got != c.want {
			t.Errorf("Command(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
