package cli

import (
	"flag"
	"io"
)

// CommandFlags names every command of the table ("tasks watch") with the
// flags it takes besides the global ones, for the test that asks each for
// its --help.
func CommandFlags() map[string][]string {
	m := map[string][]string{}
	for _, c := range commands() {
		fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.flags(fs)
		names := []string{}
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		m[c.name()] = names
	}
	return m
}
