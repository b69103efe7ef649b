package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/retrykit/retry/client"
)

func policyPutFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var spec, file string
	fs.StringVar(&spec, "spec", "", "the policy's settings as `JSON`, e.g. '{\"backoff\":\"EXPONENTIAL\",\"initialDelayMs\":200,\"maxAttempts\":5}'")
	fs.StringVar(&file, "file", "", "read the settings' JSON from `FILE` (- for stdin)")
	return func(ctx context.Context, r *runner, args []string) error {
		if spec != "" && file != "" {
			return usagef("give --spec or --file, not both")
		}
		raw := []byte(spec)
		if file != "" {
			var err error
			if raw, err = r.readFile(file); err != nil {
				return err
			}
		}
		p := client.Policy{ID: args[0]}
		if len(raw) > 0 {
			// The settings are checked here, by the same decoder the
			// service uses, so a mistake names its field before any call.
			// A policyId in them (as "policies get --json" prints) must
			// agree with the argument.
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("policy settings: %w", err)
			}
			if p.ID == "" {
				p.ID = args[0]
			}
			if p.ID != args[0] {
				return usagef("the settings name policyId %q, the argument %q", p.ID, args[0])
			}
		}
		stored, created, err := r.c.PutPolicy(ctx, p)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(stored)
		}
		if created {
			fmt.Fprintf(r.env.Stdout, "registered policy %s\n", stored.ID)
		} else {
			fmt.Fprintf(r.env.Stdout, "policy %s was already registered with these settings\n", stored.ID)
		}
		return r.printPolicy(stored)
	}
}

func policyGet(ctx context.Context, r *runner, args []string) error {
	p, err := r.c.GetPolicy(ctx, args[0])
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(p)
	}
	return r.printPolicy(p)
}

func policyListFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var o client.ListOptions
	pageFlags(fs, &o)
	return func(ctx context.Context, r *runner, _ []string) error {
		page, err := r.c.ListPolicies(ctx, o)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(page)
		}
		return r.printPolicies(page)
	}
}
