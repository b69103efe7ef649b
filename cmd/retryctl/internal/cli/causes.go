package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/retrykit/retry/client"
)

func causesFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var policy string
	fs.StringVar(&policy, "policy", "", "only dead letters of policy `ID`")
	return func(ctx context.Context, r *runner, _ []string) error {
		c, err := r.c.DeadLetterCauses(ctx, policy)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(c)
		}
		return r.printCauses(c)
	}
}

// printCauses writes the dead letters' causes as a table, the largest
// first as the service sorts them, and says when it counted only some.
func (r *runner) printCauses(c *client.Causes) error {
	w := r.table()
	fmt.Fprintln(w, "CAUSE\tCOUNT\tFIRST SEEN\tLAST SEEN\tEXAMPLE")
	for _, g := range c.Items {
		example := g.Example
		if g.LastStatus != 0 && example == "" {
			example = strconv.Itoa(g.LastStatus)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", g.Cause, g.Count, when(g.FirstSeenAt), when(g.LastSeenAt), orDash(clip(example, 60)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if c.Truncated {
		fmt.Fprintf(r.env.Stdout, "counted the newest %d dead letters only: there are more\n", c.Scanned)
	} else {
		fmt.Fprintf(r.env.Stdout, "%d dead letter(s)\n", c.Scanned)
	}
	if len(c.Items) > 0 {
		_, err := fmt.Fprintf(r.env.Stdout, "redrive a cause's tasks: retryctl dead-letters redrive --cause %q\n", c.Items[0].Cause)
		return err
	}
	return nil
}
