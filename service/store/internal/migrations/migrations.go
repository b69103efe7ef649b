// Package migrations reads the numbered schema changes the SQL stores
// embed, migrations/NNN_name.up.sql, and says which of them a database
// lacks. Applying them is each store's own: in one transaction (SQLite) or
// one each under an advisory lock (PostgreSQL), with its own table of the
// applied ones.
package migrations

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// String names m as its file does, for errors: 001_init.
func (m Migration) String() string { return fmt.Sprintf("%03d_%s", m.Version, m.Name) }

// Load returns the migrations of fsys, migrations/NNN_name.up.sql, in
// order. Their numbers must run 1, 2, 3… without gaps.
func Load(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.up.sql")
	if err != nil {
		return nil, err
	}
	ms := make([]Migration, 0, len(names))
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".up.sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration file %s: want NNN_name.up.sql", n)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %d (%s): want number %d", m.Version, m.Name, i+1)
		}
	}
	return ms, nil
}

// Version is the number of the newest migration of fsys, 0 when they
// cannot be read.
func Version(fsys fs.FS) int {
	ms, err := Load(fsys)
	if err != nil {
		return 0
	}
	return len(ms)
}

// Pending returns the migrations of ms that a database at version have
// lacks. A database newer than ms is refused: this program would misread
// it.
func Pending(ms []Migration, have int) ([]Migration, error) {
	if have > len(ms) {
		return nil, fmt.Errorf("is version %d, newer than this program's %d", have, len(ms))
	}
	return ms[have:], nil
}
