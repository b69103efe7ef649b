package postgres

import (
	"context"
	"io/fs"
	"time"
)

// MigrateFS is Migrate with the migrations of fsys instead of the embedded
// ones, so that tests can add one that fails.
func MigrateFS(ctx context.Context, url string, fsys fs.FS, opts ...Option) error {
	return migrateURL(ctx, url, fsys, opts)
}

// Note and ParseNote expose the notification payload's codec to the fuzz test.
func Note(id string, due time.Time) string { return note(id, due) }

func ParseNote(payload string) (string, time.Time, bool) { return parseNote(payload) }
