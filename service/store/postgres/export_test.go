package postgres

import (
	"context"
	"io/fs"
)

// MigrateFS is Migrate with the migrations of fsys instead of the embedded
// ones, so that tests can add one that fails.
func MigrateFS(ctx context.Context, url string, fsys fs.FS, opts ...Option) error {
	return migrateURL(ctx, url, fsys, opts)
}

// WithCreateRuns sets how many batches of TaskCreate calls run at once,
// for the benchmark that chose createRuns.
func WithCreateRuns(n int) Option { return func(c *config) { c.createRuns = n } }

// ExplainAnalyze runs sql on one of the store's connections under EXPLAIN
// (ANALYZE, FORMAT JSON) and returns the plan, to see how the server ran
// the store's statements with the store's settings.
func ExplainAnalyze(ctx context.Context, s *Store, sql string, args ...any) (string, error) {
	var plan string
	err := s.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan)
	return plan, err
}
