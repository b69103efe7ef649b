package cli_test

import (
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
)

// Every command of the table answers --help, -h and "retryctl help" with
// its usage on stdout, naming each of its flags, and exits 0; an unknown
// flag exits 2 with that usage on stderr.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	// No server: help must not call one.
	s := &server{url: "http://127.0.0.1:1"}
	cmds := cli.CommandFlags()
	if len(cmds) < 12 {
		t.Fatalf("only %d commands in the table: %v", len(cmds), cmds)
	}
	groups := map[string][]string{}
	for name, flags := range cmds {
		group, verb, _ := strings.Cut(name, " ")
		groups[group] = append(groups[group], verb)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := strings.Fields(name)
			var first string
			for i, form := range [][]string{append(args, "--help"), append(args, "-h"), append([]string{"help"}, args...)} {
				r := s.run(t, "", nil, form...)
				if r.code != cli.ExitOK || r.stderr != "" {
					t.Fatalf("%v: exit %d, stderr %q", form, r.code, r.stderr)
				}
				if i == 0 {
					first = r.stdout
				} else if r.stdout != first {
					t.Errorf("%v prints other help than --help:\n%s", form, r.stdout)
				}
			}
			wantContains(t, name+" --help", first, "Usage:", "retryctl "+name+" ")
			if head, _, _ := strings.Cut(first, "\n"); !strings.HasPrefix(head, "retryctl "+name+": ") || len(head) < len(name)+15 {
				t.Errorf("the first line is not a description: %q", head)
			}
			for _, f := range flags {
				dash := "--"
				if len(f) == 1 {
					dash = "-"
				}
				wantContains(t, name+" --help", first, "\n  "+dash+f+" ")
			}
			// Tables by default, --json everywhere.
			wantContains(t, name+" --help", first, "\n  --json ")
			if group != "kafka" {
				wantContains(t, name+" --help", first, "--url", "--token")
			}
			r := s.run(t, "", nil, append(args, "--no-such-flag")...)
			if r.code != cli.ExitUsage || r.stdout != "" {
				t.Errorf("unknown flag: exit %d, stdout %q; want %d and nothing", r.code, r.stdout, cli.ExitUsage)
			}
			wantContains(t, "unknown flag's stderr", r.stderr, "no-such-flag", first)
		})
	}
	for group, verbs := range groups {
		for _, form := range [][]string{{group, "--help"}, {group, "-h"}, {"help", group}} {
			r := s.run(t, "", nil, form...)
			if r.code != cli.ExitOK {
				t.Errorf("%v: exit %d, stderr %q", form, r.code, r.stderr)
			}
			for _, v := range verbs {
				wantContains(t, strings.Join(form, " "), r.stdout, "  "+v+" — ", "retryctl "+group+" "+v+" ")
			}
		}
	}
	for _, form := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--json", "--help"}} {
		r := s.run(t, "", nil, form...)
		if r.code != cli.ExitOK {
			t.Errorf("%v: exit %d, stderr %q", form, r.code, r.stderr)
		}
		for name := range cmds {
			wantContains(t, strings.Join(form, " "), r.stdout, "  "+name+" ")
		}
	}
	for _, form := range [][]string{{"help", "nope"}, {"help", "tasks", "nope"}, {"nope", "--help"}} {
		if r := s.run(t, "", nil, form...); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "unknown command") {
			t.Errorf("%v: exit %d, stderr %q; want %d, unknown command", form, r.code, r.stderr, cli.ExitUsage)
		}
	}
}
