package postgres

import (
	"context"
	"io/fs"

	"github.com/retrykit/retry/service/store"
)

// MigrateFS is Migrate with the migrations of fsys instead of the embedded
// ones, so that tests can add one that fails.
func MigrateFS(ctx context.Context, url string, fsys fs.FS, opts ...Option) error {
	return migrateURL(ctx, url, fsys, opts)
}

// Note and ParseNote expose the notification payload's codec to the fuzz test.
func Note(d store.Due) string { return note(d) }

func ParseNote(payload string) (store.Due, bool) { return parseNote(payload) }

// WithCreateRuns sets how many batches of TaskCreate calls run at once,
// for the benchmark that chose createRuns.
func WithCreateRuns(n int) Option { return func(c *config) { c.createRuns = n } }
