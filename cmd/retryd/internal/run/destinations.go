package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// SecretsConfig is what the flags of secrets and destinations say.
type SecretsConfig struct {
	// SecretsKeyFile holds the key that seals secrets at rest: 32 random
	// bytes in base64. On the embedded store it defaults to the store's
	// path with ".key" added, made at first start; a shared store needs
	// it, the same file for every instance.
	SecretsKeyFile string
	// SecretsOldKeyFiles are keys SecretsKeyFile replaced, which still
	// open what they sealed until `retryd secrets rotate-key` has sealed
	// it again.
	SecretsOldKeyFiles []string
	// SecretHeaders names task headers to seal besides Authorization,
	// Proxy-Authorization and Cookie.
	SecretHeaders []string
	// DestinationMaxTimeout bounds a destination's timeoutMs; 0 means
	// the attempt timeout.
	DestinationMaxTimeout time.Duration
}

func secretsFlags(fs *flag.FlagSet, c *SecretsConfig) {
	fs.StringVar(&c.SecretsKeyFile, "secrets-key-file", "",
		"`file` of the key (32 random bytes in base64, as `openssl rand -base64 32` writes) that seals credentials and signing secrets at rest; "+
			"default on the embedded store: the store's path + \".key\", made at first start (mode 0600); required on a shared store, the same for every instance")
	fs.Var(stringList{&c.SecretsOldKeyFiles}, "secrets-old-key-files",
		"key `files` the current key replaced (comma-separated): they still open what they sealed until `retryd secrets rotate-key` seals it again")
	fs.Var(stringList{&c.SecretHeaders}, "secret-headers",
		"task header `names` (comma-separated) to seal at rest and mask in answers, besides Authorization, Proxy-Authorization and Cookie")
	fs.DurationVar(&c.DestinationMaxTimeout, "destination-max-timeout", 0,
		"the longest timeoutMs a destination may set (0: --attempt-timeout); the lease must exceed it by a second")
}

// loadKeys returns the keyring of c: its key file's, made at first start
// on the embedded store (kind "sqlite"); made names the file when it made
// one (see checkNewKey).
func loadKeys(c Config, kind string, log *slog.Logger) (kr *secrets.Keyring, made string, err error) {
	path := c.SecretsKeyFile
	if path == "" {
		if kind != "sqlite" {
			return nil, "", usageError{errors.New("--secrets-key-file is required with a shared store, the same file for every instance " +
				"(make one with: openssl rand -base64 32 > retryd.key && chmod 600 retryd.key)")}
		}
		path = strings.TrimPrefix(c.Store, "sqlite://") + ".key"
		var created bool
		if kr, created, err = secrets.EnsureKeyFile(path); err != nil {
			return nil, "", fmt.Errorf("secrets key: %w", err)
		}
		if created {
			made = path
			log.Info("made a new secrets key; back it up with the database: without it, the secrets it sealed are lost", "file", path)
		}
		if len(c.SecretsOldKeyFiles) == 0 {
			return kr, made, nil
		}
	}
	if kr, err = secrets.LoadKeyFile(path, c.SecretsOldKeyFiles...); err != nil {
		return nil, "", usageError{fmt.Errorf("--secrets-key-file: %w", err)}
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the secrets key file can be read by others than its owner; chmod 600 it", "file", path, "mode", fi.Mode().Perm().String())
	}
	return kr, made, nil
}

// errSealedBefore stops the walk of checkNewKey at the first destination.
var errSealedBefore = errors.New("a destination sealed before")

// checkNewKey refuses to go on with the key file made (just now, by
// loadKeys) when st already holds destinations: they were sealed under a
// key whose file is gone, and a new key would leave them unusable without
// a word. The new file is removed, so that the old one can be put back.
func checkNewKey(ctx context.Context, st store.Store, made string) error {
	w, ok := st.(store.DestinationWalker)
	if !ok || made == "" {
		return nil
	}
	err := w.DestinationEach(ctx, func(string, string) error { return errSealedBefore })
	if !errors.Is(err, errSealedBefore) {
		return err
	}
	if rerr := os.Remove(made); rerr != nil {
		return fmt.Errorf("removing the new key file %s: %w", made, rerr)
	}
	return usageError{fmt.Errorf("the store holds destinations whose secrets were sealed under a key, and its file %s is missing: "+
		"put the key file back (or give it with --secrets-key-file); a new key would open none of them", made)}
}

// destinationLimits returns where the rate and in-flight limits of
// destinations are held: in the store, for every instance sharing it, or
// in this process when it owns its store.
func destinationLimits(st store.Store) store.Limits {
	if l, ok := st.(store.Limits); ok {
		return l
	}
	return limits.NewLocal()
}

// openGate returns the gate that keeps destinations' contracts at each
// attempt (package gate), reading them from st.
func openGate(st store.Store, keys *secrets.Keyring, disp *dispatch.Dispatcher, lease, maxTimeout time.Duration,
	rec gate.Recorder, log *slog.Logger) (*gate.Gate, error) {
	ds, ok := st.(store.Destinations)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no destinations", st)
	}
	return gate.New(gate.Config{Store: ds, Limits: destinationLimits(st), Keys: keys, Dispatcher: disp,
		Hold: lease, MaxTimeout: maxTimeout, Recorder: rec, Logger: log})
}
