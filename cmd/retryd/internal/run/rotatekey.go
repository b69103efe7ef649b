package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Secrets runs `retryd secrets <command>`; rotate-key is the one command.
func Secrets(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprint(stderr, "Usage: retryd secrets rotate-key [flags]\n\n"+
			"rotate-key seals every secret of the store again under the current key.\n"+
			"See retryd secrets rotate-key -h.\n")
	}
	if len(args) == 0 {
		usage()
		return usageError{errors.New("secrets: name a command: rotate-key")}
	}
	switch args[0] {
	case "rotate-key":
		return RotateKey(ctx, args[1:], getenv, stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage()
		return flag.ErrHelp
	}
	usage()
	return usageError{fmt.Errorf("secrets: unknown command %q; want rotate-key", args[0])}
}

// rotateKeyHelp is rotate-key's usage: the procedure it is a step of.
const rotateKeyHelp = `Usage: retryd secrets rotate-key --store … --secrets-key-file NEW --secrets-old-key-files OLD

Seals again, under the current key (--secrets-key-file), every secret the
store holds sealed under an old one (--secrets-old-key-files): destinations'
credentials and signing secrets, and tasks' credential headers, of every
tenant and task status. Afterwards the old key opens nothing and can go.

To rotate the key of a shared store (PostgreSQL, Redis):
  1. make a new key:  openssl rand -base64 32 > new.key; chmod 600 new.key
  2. restart every instance with
       --secrets-key-file new.key --secrets-old-key-files old.key
     so that each seals with the new key and still opens the old key's;
  3. run, while they run:
       retryd secrets rotate-key --store … --secrets-key-file new.key --secrets-old-key-files old.key
  4. restart every instance without --secrets-old-key-files; delete old.key.

The embedded store (SQLite) is held by the one retryd that runs on it:
stop retryd, run step 3, then start retryd without --secrets-old-key-files.
Its default key file is the store's path + ".key": move that file aside as
the old key and put the new key in its place.

It prints how many destinations and tasks it sealed again, and exits 1 when
any value opens with none of the keys given (each is listed on stderr, and
left as it is). Running it again reseals nothing more and checks that every
value opens with the current key. Every partition of a Redis store is walked,
whatever --claim-partitions says. A resealed destination's version moves on,
as a change through the API would move it.

Flags:
`

// maxReported bounds the values that do not open which RotateKey lists
// one by one; the counts cover the rest.
const maxReported = 20

// RotateKey is `retryd secrets rotate-key`: it seals every sealed value of
// the store again under the current key of --secrets-key-file, opening it
// with that key or any of --secrets-old-key-files, so that the old keys
// can be dropped. It is step 3 of a rotation:
//
//  1. make a new key file: openssl rand -base64 32 > new.key; chmod 600 new.key
//  2. restart every instance with --secrets-key-file new.key
//     --secrets-old-key-files old.key: new secrets are sealed with the new
//     key, and the old key's still open;
//  3. run retryd secrets rotate-key --store … --secrets-key-file new.key
//     --secrets-old-key-files old.key, which may run while the instances
//     do;
//  4. restart every instance without --secrets-old-key-files, and delete
//     the old key.
//
// Step 2 comes first so that no instance seals with the old key after the
// walk has passed. On the embedded store, which one retryd holds, RotateKey
// opens the file as retryd does (sqlite.Exclusive), so it runs while retryd
// is stopped, and says so when retryd is not.
//
// The values are destinations' secrets (store.DestinationWalker, each
// written back at the version read, through destination.Update) and the
// sealed values of tasks' headers (store.TaskHeaderResealer, each written
// only if unchanged since read). RotateKey writes one line to stdout: how
// many of each it sealed again. A value that none of the keys opens is
// listed on stderr and left as it is, and RotateKey then fails, so that
// the operator keeps the old keys until it is dealt with.
func RotateKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c Config
	fs := flag.NewFlagSet("retryd secrets rotate-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeFlags(fs, &c)
	fs.StringVar(&c.SecretsKeyFile, "secrets-key-file", "",
		"`file` of the current key, which seals: the new key (required on a shared store; default on the embedded store: the store's path + \".key\")")
	fs.Var(stringList{&c.SecretsOldKeyFiles}, "secrets-old-key-files",
		"key `files` (comma-separated) the current key replaced, which open what they sealed")
	fs.Usage = func() {
		fmt.Fprint(stderr, rotateKeyHelp)
		fs.PrintDefaults()
		fmt.Fprint(stderr, usageFooter)
	}
	if err := parse(fs, args, getenv); err != nil {
		return usageError{err}
	}
	kind, err := storeKind(c.Store)
	if err != nil {
		return err
	}
	if err := checkStoreFlags(kind, c); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if c.SecretsKeyFile == "" && kind == "sqlite" {
		// The file retryd made at its first start; never made here: a
		// new key would open nothing the store holds.
		c.SecretsKeyFile = strings.TrimPrefix(c.Store, "sqlite://") + ".key"
	}
	keys, _, err := loadKeys(c, kind, log)
	if err != nil {
		return err
	}
	o, err := openStore(ctx, c, log)
	if errors.Is(err, sqlite.ErrLocked) {
		return fmt.Errorf("%w\nretryd holds the embedded store while it runs: stop it, run rotate-key, "+
			"then start retryd again without --secrets-old-key-files", err)
	}
	if err != nil {
		return err
	}
	defer o.Close()

	r := &rotation{keys: keys, stderr: stderr}
	if err := r.destinations(ctx, o.Store); err != nil {
		return fmt.Errorf("rotate-key %s: %w", o.where, err)
	}
	if err := r.tasks(ctx, o.Store); err != nil {
		return fmt.Errorf("rotate-key %s: %w", o.where, err)
	}
	fmt.Fprintf(stdout, "retryd secrets rotate-key: %s: resealed %d of %d destinations and %d of %d tasks with sealed headers under key %s\n",
		o.where, r.destResealed, r.destSeen, r.taskResealed, r.taskSeen, keys.KeyID())
	if r.destFailed+r.taskFailed > 0 {
		return fmt.Errorf("%d destinations and %d tasks were left as they were (listed above), most likely holding values "+
			"that none of the keys given opens: keep the old keys until they are dealt with", r.destFailed, r.taskFailed)
	}
	return nil
}

// rotation is one run of RotateKey: the keys and what it has counted. The
// stores call back one at a time, so it needs no lock.
type rotation struct {
	keys   *secrets.Keyring
	stderr io.Writer

	destSeen, destResealed, destFailed int
	taskSeen, taskResealed, taskFailed int
	reported                           int
}

// failed lists on stderr a record left as it was, up to maxReported of
// them. The errors name the record and field, never a value.
func (r *rotation) failed(what string, err error) {
	r.reported++
	switch {
	case r.reported <= maxReported:
		fmt.Fprintf(r.stderr, "retryd secrets rotate-key: %s: %v\n", what, err)
	case r.reported == maxReported+1:
		fmt.Fprintf(r.stderr, "retryd secrets rotate-key: more values do not open; the counts below include them\n")
	}
}

// destinations reseals the secrets of every destination of st.
func (r *rotation) destinations(ctx context.Context, st store.Store) error {
	ds, ok := st.(store.Destinations)
	w, walks := st.(store.DestinationWalker)
	if !ok || !walks {
		return fmt.Errorf("store %T cannot list its destinations", st)
	}
	return w.DestinationEach(ctx, func(tenant, id string) error {
		changed := false
		_, _, err := destination.Update(ctx, ds, tenant, id, time.Now(), func(d *destination.Destination) (bool, error) {
			var err error
			changed, err = d.Reseal(r.keys.Reseal, tenant)
			return changed, err
		}, 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil // deleted since it was listed
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// A secret that does not open, a spec that does not decode, or
			// a destination changed by others at every try: it keeps its
			// old key's tokens, and the run fails.
			r.destSeen++
			r.destFailed++
			if !strings.Contains(err.Error(), "destination "+id+":") {
				err = fmt.Errorf("destination %s: %w", id, err)
			}
			r.failed("tenant "+tenant, err)
			return nil
		}
		r.destSeen++
		if changed {
			r.destResealed++
		}
		return nil
	})
}

// tasks reseals the sealed values of the headers of every task of st.
func (r *rotation) tasks(ctx context.Context, st store.Store) error {
	rs, ok := st.(store.TaskHeaderResealer)
	if !ok {
		return fmt.Errorf("store %T cannot reseal its tasks' headers", st)
	}
	n, err := rs.TaskHeadersReseal(ctx, func(tenant, id string, h map[string]string) (map[string]string, bool, error) {
		r.taskSeen++
		out, changed, err := destination.ResealHeaders(r.keys.Reseal, tenant, id, h)
		if err != nil {
			r.taskFailed++
			r.failed("tenant "+tenant, err)
			return h, false, nil
		}
		return out, changed, nil
	})
	r.taskResealed = n
	return err
}
