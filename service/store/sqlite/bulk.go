package sqlite

import (
	"database/sql"
	"fmt"
	"strings"
)

// maxBulkRows is the largest number of rows one bulk statement binds.
const maxBulkRows = 256

// bulkKey names one prepared shape of a bulk statement.
type bulkKey struct {
	sql  string
	rows int
}

// bulk runs the statement sqlFmt (whose %s becomes a VALUES list of rows of
// cols parameters each) over rows, in chunks of power-of-two sizes, so that
// at most nine shapes of each statement are ever prepared and any number of
// rows takes a handful of executions. Values are bound, never spliced into
// the SQL, so strings keep every byte. each, if not nil, reads the rows a
// chunk returns; it must close them.
func (w *wtx) bulk(sqlFmt string, cols int, rows [][]any, each func(*sql.Rows) error) error {
	for len(rows) > 0 {
		k := maxBulkRows
		for k > len(rows) {
			k /= 2
		}
		st, err := w.bulkStmt(sqlFmt, cols, k)
		if err != nil {
			return err
		}
		args := make([]any, 0, k*cols)
		for _, r := range rows[:k] {
			args = append(args, r...)
		}
		if each == nil {
			_, err = st.Exec(args...)
		} else {
			var res *sql.Rows
			if res, err = st.Query(args...); err == nil {
				err = each(res)
			}
		}
		if err != nil {
			return err
		}
		rows = rows[k:]
	}
	return nil
}

func (w *wtx) bulkStmt(sqlFmt string, cols, k int) (*sql.Stmt, error) {
	key := bulkKey{sqlFmt, k}
	if st, ok := w.bulkStmts[key]; ok {
		return st, nil
	}
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	values := strings.Repeat(row+", ", k-1) + row
	st, err := w.conn.PrepareContext(bg, fmt.Sprintf(sqlFmt, values))
	if err != nil {
		return nil, err
	}
	if w.bulkStmts == nil {
		w.bulkStmts = map[bulkKey]*sql.Stmt{}
	}
	w.bulkStmts[key] = st
	return st, nil
}
