package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/retrykit/retry/client"
)

// specFlags registers --spec and --file, the two ways a command takes a
// JSON object; what names it in their usage.
func specFlags(fs *flag.FlagSet, spec, file *string, what string) {
	fs.StringVar(spec, "spec", "", what+" as `JSON`")
	fs.StringVar(file, "file", "", "read "+what+" from `FILE` (- for stdin)")
}

// readSpec returns the JSON of --spec or --file, exactly one of which is
// required.
func (r *runner) readSpec(spec, file string) ([]byte, error) {
	switch {
	case spec != "" && file != "":
		return nil, usagef("give --spec or --file, not both")
	case spec != "":
		return []byte(spec), nil
	case file != "":
		return r.readFile(file)
	}
	return nil, usagef("give the JSON with --spec or --file")
}

func destinationPutFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var spec, file string
	specFlags(fs, &spec, &file, "the destination")
	return func(ctx context.Context, r *runner, args []string) error {
		raw, err := r.readSpec(spec, file)
		if err != nil {
			return err
		}
		// Strictly: client.Destination would drop a field it does not
		// know, and a misspelt setting would be lost without a word. What
		// "destinations get --json" prints is taken (its version and times
		// are not sent).
		var d client.Destination
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return fmt.Errorf("destination: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return fmt.Errorf("destination: more after the JSON object")
		}
		if d.ID == "" {
			d.ID = args[0]
		}
		if d.ID != args[0] {
			return usagef("the JSON names destinationId %q, the argument %q", d.ID, args[0])
		}
		stored, created, err := r.c.CreateDestination(ctx, d)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(stored)
		}
		if created {
			fmt.Fprintf(r.env.Stdout, "created destination %s\n", stored.ID)
		} else {
			fmt.Fprintf(r.env.Stdout, "destination %s already exists with these settings\n", stored.ID)
		}
		if err := r.printDestination(stored); err != nil {
			return err
		}
		return r.printNewSecret(stored)
	}
}

func destinationGet(ctx context.Context, r *runner, args []string) error {
	return r.showDestination(r.c.GetDestination(ctx, args[0]))
}

func (r *runner) showDestination(d *client.Destination, err error) error {
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(d)
	}
	return r.printDestination(d)
}

func destinationListFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var o client.ListOptions
	pageFlags(fs, &o)
	return func(ctx context.Context, r *runner, _ []string) error {
		page, err := r.c.ListDestinations(ctx, o)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(page)
		}
		return r.printDestinations(page)
	}
}

func destinationPatchFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var spec, file string
	var version int64
	specFlags(fs, &spec, &file, "the merge patch")
	fs.Int64Var(&version, "version", 0, "change the destination only if it is still at `N` (its version as get printed it)")
	return func(ctx context.Context, r *runner, args []string) error {
		raw, err := r.readSpec(spec, file)
		if err != nil {
			return err
		}
		if version < 0 {
			return usagef("--version must be a version, 1 or more")
		}
		if !json.Valid(raw) {
			return fmt.Errorf("the merge patch is not JSON")
		}
		d, err := r.c.PatchDestination(ctx, args[0], json.RawMessage(raw), version)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(d)
		}
		fmt.Fprintf(r.env.Stdout, "updated destination %s, now at version %d\n", d.ID, d.Version)
		if err := r.printDestination(d); err != nil {
			return err
		}
		return r.printNewSecret(d)
	}
}

// destinationStatusFlags is pause (pause set) or resume.
func destinationStatusFlags(pause bool) func(*flag.FlagSet) func(context.Context, *runner, []string) error {
	return func(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
		var reason string
		fs.StringVar(&reason, "reason", "", "why, as `TEXT` the destination shows until its status changes")
		return func(ctx context.Context, r *runner, args []string) error {
			change, done := r.c.ResumeDestination, "resumed"
			if pause {
				change, done = r.c.PauseDestination, "paused"
			}
			d, err := change(ctx, args[0], reason)
			if err != nil {
				return err
			}
			if r.json {
				return r.printJSON(d)
			}
			fmt.Fprintf(r.env.Stdout, "%s destination %s\n", done, d.ID)
			return r.printDestination(d)
		}
	}
}

func destinationRotateFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	var overlap time.Duration
	fs.DurationVar(&overlap, "overlap", 0, "how long the secret replaced goes on signing beside the new one, `D` (default 24h; 0 stops it at once; at most 720h)")
	return func(ctx context.Context, r *runner, args []string) error {
		if overlap < 0 {
			return usagef("--overlap must not be negative")
		}
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "overlap" })
		if given && overlap == 0 {
			overlap = client.NoOverlap // the client's 0 is the default
		}
		d, err := r.c.RotateSigningSecret(ctx, args[0], overlap)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(d)
		}
		fmt.Fprintf(r.env.Stdout, "rotated the signing secret of destination %s\n", d.ID)
		if err := r.printNewSecret(d); err != nil {
			return err
		}
		now := client.MillisOf(time.Now())
		for _, p := range d.Signing.Previous {
			if p.Until > now {
				fmt.Fprintf(r.env.Stdout, "A previous secret signs beside it until %s.\n", when(p.Until))
			}
		}
		if len(d.Signing.Previous) == 0 {
			fmt.Fprintln(r.env.Stdout, "No previous secret signs beside it: receivers must check with the new one now.")
		}
		return nil
	}
}

func destinationDelete(ctx context.Context, r *runner, args []string) error {
	if err := r.c.DeleteDestination(ctx, args[0]); err != nil {
		return err
	}
	if r.json {
		return r.printJSON(struct {
			ID      string `json:"destinationId"`
			Deleted bool   `json:"deleted"`
		}{args[0], true})
	}
	_, err := fmt.Fprintf(r.env.Stdout, "deleted destination %s\n", args[0])
	return err
}

// printNewSecret prints the signing secret retryd made, when the answer
// holds one: apart, on a line of its own, and saying that it is shown only
// this once, for nothing will show it again.
func (r *runner) printNewSecret(d *client.Destination) error {
	if d.Signing == nil || d.Signing.Secret.Value == "" {
		return nil
	}
	_, err := fmt.Fprintf(r.env.Stdout, "\nNew signing secret, shown this once (give it to the receivers now):\n\n    %s\n\n",
		d.Signing.Secret.Value)
	return err
}
