package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/retrykit/retry/client"
)

func previewFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var spec, file string
	var req client.PreviewRequest
	fs.StringVar(&spec, "spec", "", "preview these settings, as `JSON` (as policies put takes them), instead of a registered policy")
	fs.StringVar(&file, "file", "", "read the settings' JSON from `FILE` (- for stdin)")
	fs.IntVar(&req.Samples, "samples", 0, fmt.Sprintf("simulate `N` executions (default 2000, at most %d)", client.MaxPreviewSamples))
	return func(ctx context.Context, r *runner, args []string) error {
		given := btoi(len(args) == 1) + btoi(spec != "") + btoi(file != "")
		if given != 1 {
			return usagef("give one of POLICY_ID, --spec and --file")
		}
		if len(args) == 1 {
			req.PolicyID = args[0]
		} else {
			raw := []byte(spec)
			if file != "" {
				var err error
				if raw, err = r.readFile(file); err != nil {
					return err
				}
			}
			// Decoded as policies put decodes, so that a mistake names
			// its field, and a policy as "policies get --json" prints it
			// (policyId and all) is taken too.
			var p client.Policy
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("policy settings: %w", err)
			}
			req.Policy = &p.Settings
		}
		pv, err := r.c.PreviewPolicy(ctx, req)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(pv)
		}
		return r.printPreview(pv)
	}
}

// printPreview writes, for each attempt, the percentiles of the wait before
// it and of the time waited in all, in human durations, and how often the
// policy let it happen.
func (r *runner) printPreview(pv *client.Preview) error {
	w := r.table()
	fmt.Fprintln(w, "ATTEMPT\tDELAY p5\tp50\tp95\tCUMULATIVE p5\tp50\tp95\tREACHED")
	for _, a := range pv.Attempts {
		d, c := a.DelayMs, a.CumulativeMs
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, human(d.P5), human(d.P50), human(d.P95),
			human(c.P5), human(c.P50), human(c.P95), percent(a.Reached))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	b := "none"
	if pv.BudgetMs > 0 {
		b = human(pv.BudgetMs)
	}
	_, err := fmt.Fprintf(r.env.Stdout, "budget: %s; max attempts: %d; from %d simulated executions\n", b, pv.MaxAttempts, pv.Samples)
	return err
}

// percent renders a fraction as a percentage with one decimal at most:
// 100%, 87.5%.
func percent(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f*100, 'f', 1, 64), ".0") + "%"
}
