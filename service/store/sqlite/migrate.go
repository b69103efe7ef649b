package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store/internal/migrations"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// SchemaVersion is the number of the newest migration this package holds.
func SchemaVersion() int { return migrations.Version(migrationFiles) }

// migrate applies the migrations the file lacks, all in one transaction
// with their schema_migrations rows, so that a failure leaves the schema as
// it was. A file whose schema is newer than this package's is refused.
func migrate(ctx context.Context, conn *sql.Conn) (err error) {
	ms, err := migrations.Load(migrationFiles)
	if err != nil {
		return err
	}
	// IMMEDIATE takes the write lock now, so that two processes opening a
	// new file at once do not both apply migration 1.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var have int
	if err := conn.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	pending, err := migrations.Pending(ms, have)
	if err != nil {
		return fmt.Errorf("migrate: the file's schema %w", err)
	}
	for _, m := range pending {
		if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("migration %s: %w", m, err)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
