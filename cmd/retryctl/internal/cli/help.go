package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// isHelp reports whether arg asks for help the way the flag package
// understands it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// topUsage is "retryctl --help": every command with its summary, and the
// global flags.
func topUsage() string {
	var b strings.Builder
	b.WriteString("retryctl talks to retryd.\n\n")
	b.WriteString("Usage: retryctl [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]\n\nCommands:\n")
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %s\t%s\n", c.name(), c.summary)
	}
	w.Flush()
	b.WriteString("\nRun \"retryctl COMMAND --help\" (retryctl tasks watch --help) or \"retryctl help COMMAND\"\n" +
		"for a command's arguments and flags, \"retryctl GROUP --help\" for a group's commands.\n")
	b.WriteString("\nGlobal flags (also accepted after the command):\n")
	writeFlags(&b, globalFlagSet())
	b.WriteString("\nTables by default; --json prints the API's JSON instead.\n")
	b.WriteString("Exit status: 0 on success, 1 when a request fails, 2 for a bad command line.\n")
	return b.String()
}

// groupUsage is "retryctl GROUP --help": the group's commands and how they
// are called.
func groupUsage(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: retryctl %s COMMAND [ARGS]\n\nCommands:\n", group)
	for _, c := range groupCommands(group) {
		fmt.Fprintf(&b, "  %s — %s\n", c.verb, c.summary)
		for _, f := range c.forms {
			fmt.Fprintf(&b, "      retryctl %s %s\n", c.name(), indent(f, "      "))
		}
	}
	fmt.Fprintf(&b, "\nRun \"retryctl %s COMMAND --help\" for a command's flags, \"retryctl --help\" for the global ones.\n", group)
	return b.String()
}

// commandUsage is "retryctl GROUP VERB --help": the command's forms, what
// it does, and every flag it takes.
func commandUsage(c *command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "retryctl %s: %s\n\nUsage:\n", c.name(), c.summary)
	for _, f := range c.forms {
		fmt.Fprintf(&b, "  retryctl %s %s\n", c.name(), indent(f, "  "))
	}
	if c.details != "" {
		fmt.Fprintf(&b, "\n%s\n", c.details)
	}
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	c.flags(fs)
	if hasFlags(fs) {
		b.WriteString("\nFlags:\n")
		writeFlags(&b, fs)
	}
	if !c.standalone {
		b.WriteString("\nGlobal flags:\n")
		writeFlags(&b, globalFlagSet())
	}
	return b.String()
}

// indent indents the continuation lines of a usage form.
func indent(s, by string) string { return strings.ReplaceAll(s, "\n", "\n"+by) }

func globalFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("retryctl", flag.ContinueOnError)
	g := &globals{url: DefaultURL}
	g.register(fs)
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// writeFlags lists fs's flags, one a line: "--name ARG  usage (default D)",
// ARG being the usage's `quoted` word as in flag.PrintDefaults. A flag of
// one letter takes one dash, as people type it (-H).
func writeFlags(out io.Writer, fs *flag.FlagSet) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		arg, use := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		name := dash + f.Name
		if arg != "" {
			name += " " + arg
		}
		if !zeroDefault(f.DefValue) {
			use += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %s\t%s\n", name, use)
	})
	w.Flush()
}

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s":
		return true
	}
	return false
}
