package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/sqlite"
)

// opened is an open store with what retryd needs to know about it.
type opened struct {
	store.Store
	where  string     // for logs: the store's kind and place, without secrets
	follow store.Feed // the store's change feed; nil for a store one process owns (SQLite)
}

// newOpened returns st with where, and its change feed if it has one.
func newOpened(st store.Store, where string) *opened {
	o := &opened{Store: st, where: where}
	if f, ok := st.(store.Feed); ok {
		o.follow = f
	}
	return o
}

// storeKind is the kind of store spec names: "sqlite" (a path or
// sqlite://path), "postgres" or "redis".
func storeKind(spec string) (string, error) {
	scheme, _, ok := strings.Cut(spec, "://")
	if !ok {
		return "sqlite", nil
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		return "sqlite", nil
	case "postgres", "postgresql":
		return "postgres", nil
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		return "redis", nil
	}
	return "", usageError{fmt.Errorf("--store %q: unknown kind; give a file path or sqlite://path, postgres://… or redis://…", scheme+"://")}
}

// openStore opens the store c.Store names. A PostgreSQL store gets the
// migrations it lacks applied first (postgres.Open does).
func openStore(ctx context.Context, c Config, log *slog.Logger) (*opened, error) {
	kind, err := storeKind(c.Store)
	if err != nil {
		return nil, err
	}
	if err := checkStoreFlags(kind, c); err != nil {
		return nil, err
	}
	switch kind {
	case "postgres":
		return openPostgres(ctx, c, log)
	case "redis":
		return openRedis(ctx, c, log)
	}
	path := strings.TrimPrefix(c.Store, "sqlite://")
	// One retryd per file (Exclusive): a second one is refused, and the
	// leases a dead predecessor left are taken back at once.
	st, err := sqlite.Open(ctx, path, sqlite.Exclusive())
	if err != nil {
		return nil, err
	}
	if released, expired := st.TookBack(); released+expired > 0 {
		log.Info("took back the leases a previous retryd left", "unsent_released", released, "claimed_again", expired)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return newOpened(st, "sqlite://"+path), nil
}

// checkStoreFlags refuses flags that do nothing for the kind of store, so
// that a mistake (a --schema meant for another store) does not pass
// unnoticed.
func checkStoreFlags(kind string, c Config) error {
	var wrong []string
	if c.Schema != "" && kind != "postgres" {
		wrong = append(wrong, "--schema")
	}
	if kind != "redis" {
		if c.Prefix != "" {
			wrong = append(wrong, "--prefix")
		}
		if c.Partitions != 0 {
			wrong = append(wrong, "--partitions")
		}
		if c.ClaimPartitions != nil {
			wrong = append(wrong, "--claim-partitions")
		}
	}
	if len(wrong) > 0 {
		return usageError{fmt.Errorf("%s: not used by a %s store", strings.Join(wrong, ", "), kind)}
	}
	return nil
}

func openPostgres(ctx context.Context, c Config, log *slog.Logger) (*opened, error) {
	where, err := redactURL(c.Store)
	if err != nil {
		return nil, err
	}
	if c.Schema != "" {
		where += " schema " + c.Schema
	}
	st, err := postgres.Open(ctx, c.Store, postgres.WithSchema(c.Schema), postgres.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", where, err)
	}
	return newOpened(st, where), nil
}

func openRedis(ctx context.Context, c Config, log *slog.Logger) (*opened, error) {
	where, err := redactURL(c.Store)
	if err != nil {
		return nil, err
	}
	redis.RouteClientLogs(log)
	opts := []redis.Option{redis.WithLogger(log), redis.WithPartitions(c.Partitions)}
	if c.Prefix != "" {
		opts = append(opts, redis.WithPrefix(c.Prefix))
		where += " prefix " + c.Prefix
	}
	if c.ClaimPartitions != nil {
		opts = append(opts, redis.WithClaimPartitions(c.ClaimPartitions...))
	}
	st, err := redis.Open(ctx, c.Store, opts...)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", where, err)
	}
	return newOpened(st, where), nil
}

// redactURL returns raw without its password, in the user part or in a
// query parameter (pgx reads password= and sslpassword=). An unparsable
// URL is a usage error whose message does not repeat it, since it may
// hold a password.
func redactURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", usageError{errors.New("--store: not a valid URL (scheme://[user[:password]@]host[:port]/…)")}
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted(), nil
}
