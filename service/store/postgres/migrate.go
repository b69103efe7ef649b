package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store/internal/migrations"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// SchemaVersion is the number of the newest migration this package holds.
func SchemaVersion() int { return migrations.Version(migrationFiles) }

// Migrate applies the embedded migrations the database at url lacks, as
// Open does, and returns; `retryd migrate` runs it. Of opts only
// WithSchema matters. It is safe to run from several processes at once.
func Migrate(ctx context.Context, url string, opts ...Option) error {
	return migrateURL(ctx, url, migrationFiles, opts)
}

func migrateURL(ctx context.Context, url string, fsys fs.FS, opts []Option) error {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	pcfg, err := poolConfig(url, cfg.schema)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrate(ctx, conn, fsys); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// migrate applies the migrations of fsys that conn's schema (the first of
// its search_path that exists) lacks and returns the schema's name. Each
// migration commits alone with its retry_schema_migrations row, so a
// failure leaves the schema as the last good migration left it. A session
// advisory lock, named after the schema, keeps two processes from
// migrating one schema at once; the second waits and then finds nothing to
// do. A schema newer than this package's is refused.
func migrate(ctx context.Context, conn *pgx.Conn, fsys fs.FS) (schema string, err error) {
	ms, err := migrations.Load(fsys)
	if err != nil {
		return "", err
	}
	var current *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	if current == nil {
		var path string
		_ = conn.QueryRow(ctx, `SHOW search_path`).Scan(&path)
		return "", fmt.Errorf("migrate: no schema of the search_path (%s) exists", path)
	}
	schema = *current
	lock := "retrykit.migrate." + schema
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, lock); err != nil {
		return "", fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		// A lost connection releases the lock by itself.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, lock)
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS retry_schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM retry_schema_migrations`).Scan(&have); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	pending, err := migrations.Pending(ms, have)
	if err != nil {
		return "", fmt.Errorf("migrate: schema %s %w", schema, err)
	}
	for _, m := range pending {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO retry_schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("migration %s: %w", m, err)
		}
	}
	return schema, nil
}
