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

// PlansMade sums, over the pool's idle connections, the plans PostgreSQL
// made for their prepared statements: generic ones, made once and kept,
// and custom ones, made again at each run.
func PlansMade(ctx context.Context, s *Store) (generic, custom int64, err error) {
	conns := s.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for _, c := range conns {
		var g, cu int64
		if err := c.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0)::bigint, coalesce(sum(custom_plans), 0)::bigint
			FROM pg_prepared_statements`).Scan(&g, &cu); err != nil {
			return 0, 0, err
		}
		generic, custom = generic+g, custom+cu
	}
	return generic, custom, nil
}
