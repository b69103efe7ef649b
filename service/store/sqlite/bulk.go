package sqlite

import (
	"database/sql"
	"fmt"
	"strings"
)

// maxBulkRows is the largest number of rows one bulk statement binds.
const maxBulkRows = 256

// maxListLen is the largest number of values one IN list binds.
const maxListLen = 1024

// bulkKey names one prepared shape of a bulk or list statement.
type bulkKey struct {
	sql  string
	rows int
}

// bulk runs the statement sqlFmt (whose %s becomes a VALUES list of copies
// of row, a parenthesized item with a ? per value of a row of rows) over
// rows, in chunks of power-of-two sizes, so that at most nine shapes of
// each statement are ever prepared and any number of rows takes a handful
// of executions. Values are bound, never spliced into the SQL, so strings
// keep every byte. each, if not nil, reads the rows a chunk returns; it
// must close them.
func (w *wtx) bulk(sqlFmt, row string, rows [][]any, each func(*sql.Rows) error) error {
	for len(rows) > 0 {
		k := maxBulkRows
		for k > len(rows) {
			k /= 2
		}
		st, err := w.shaped(sqlFmt, k, row)
		if err != nil {
			return err
		}
		args := make([]any, 0, k*len(rows[0]))
		for _, r := range rows[:k] {
			args = append(args, r...)
		}
		if err := run(st, args, each); err != nil {
			return err
		}
		rows = rows[k:]
	}
	return nil
}

// inList runs the statement sqlFmt, whose %s becomes a list of bound
// parameters, for vals: args bind ?1, ?2…, then the list binds the values.
// SQLite numbers a plain ? one past the highest number it has seen, so
// sqlFmt must use each ?N of args before the list. A list is padded with
// NULLs, which no IN matches, up to a power of two, so that one execution
// does for up to maxListLen values and few shapes are ever prepared; longer
// lists take one execution per maxListLen. each is as for bulk.
func (w *wtx) inList(sqlFmt string, args []any, vals []any, each func(*sql.Rows) error) error {
	for len(vals) > 0 {
		chunk := vals[:min(len(vals), maxListLen)]
		vals = vals[len(chunk):]
		k := 1
		for k < len(chunk) {
			k *= 2
		}
		st, err := w.shaped(sqlFmt, k, "?")
		if err != nil {
			return err
		}
		all := make([]any, len(args)+k)
		copy(all, args)
		copy(all[len(args):], chunk)
		if err := run(st, all, each); err != nil {
			return err
		}
	}
	return nil
}

func run(st *sql.Stmt, args []any, each func(*sql.Rows) error) error {
	if each == nil {
		_, err := st.Exec(args...)
		return err
	}
	rows, err := st.Query(args...)
	if err != nil {
		return err
	}
	return each(rows)
}

// shaped returns sqlFmt prepared with its %s replaced by k copies of item,
// comma-separated, preparing each shape once.
func (w *wtx) shaped(sqlFmt string, k int, item string) (*sql.Stmt, error) {
	key := bulkKey{sqlFmt, k}
	if st, ok := w.bulkStmts[key]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(bg, fmt.Sprintf(sqlFmt, strings.Repeat(item+", ", k-1)+item))
	if err != nil {
		return nil, err
	}
	if w.bulkStmts == nil {
		w.bulkStmts = map[bulkKey]*sql.Stmt{}
	}
	w.bulkStmts[key] = st
	return st, nil
}

// params is the VALUES item of n bound values: (?, ?, …).
func params(n int) string { return "(" + strings.Repeat("?, ", n-1) + "?)" }

// anys returns v as a list of values to bind.
func anys[T any](v []T) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}
