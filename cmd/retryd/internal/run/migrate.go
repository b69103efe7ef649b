package run

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Migrate brings the store the flags name up to this retryd's schema and
// returns: the embedded migrations it lacks are applied, each in a
// transaction of its own, so that one that fails leaves the schema as it
// was. Serve applies them at start too; running Migrate first lets a
// deployment upgrade the schema once, before rolling out the instances. It
// is safe to run while instances use the store and from several places at
// once. A Redis store has no schema: Migrate records its number of
// partitions, as the first instance would. It writes one line to stdout.
func Migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c Config
	fs := flag.NewFlagSet("retryd migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeFlags(fs, &c)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: retryd migrate [flags]\n\nApplies the store's schema migrations and exits.\n\nFlags:\n")
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
	// The stores' warnings (a Redis server without an append-only file,
	// say) matter here as much as at start.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch kind {
	case "postgres":
		where, err := redactURL(c.Store)
		if err != nil {
			return err
		}
		if err := postgres.Migrate(ctx, c.Store, postgres.WithSchema(c.Schema)); err != nil {
			return fmt.Errorf("migrate %s: %w", where, err)
		}
		fmt.Fprintf(stdout, "retryd migrate: %s is at schema version %d\n", where, postgres.SchemaVersion())
		return nil
	case "redis":
		o, err := openRedis(ctx, c, log)
		if err != nil {
			return err
		}
		defer o.Close()
		fmt.Fprintf(stdout, "retryd migrate: %s needs no migration; it has %d partitions\n",
			o.where, o.Store.(*redis.Store).Partitions())
		return nil
	}
	o, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer o.Close()
	fmt.Fprintf(stdout, "retryd migrate: %s is at schema version %d\n", o.where, sqlite.SchemaVersion())
	return nil
}
