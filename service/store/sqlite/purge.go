package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// TaskPurge deletes old terminal tasks with their attempt logs, in one
// transaction; see store.Purger. It walks the tasks_finished index, oldest
// first, so that it reads only the tasks it deletes.
func (s *Store) TaskPurge(ctx context.Context, before time.Time, limit int) ([]string, int, error) {
	limit = store.PurgeLimit(limit)
	var refs []string
	var n int
	err := s.write(ctx, &writeOp{run: func(w *wtx) error {
		refs, n = nil, 0 // the writer may run this again
		rows, err := w.query(`SELECT t.seq, t.tenant, t.status, p.body_ref FROM tasks t INDEXED BY tasks_finished
			JOIN task_payloads p ON p.task_seq = t.seq
			WHERE t.state != 'LIVE' AND t.finished_at < ? ORDER BY t.finished_at LIMIT ?`,
			epochms.Of(before), limit)
		if err != nil {
			return err
		}
		var seqs []any
		var counted []countKey
		for rows.Next() {
			var seq int64
			var k countKey
			var ref string
			if err := rows.Scan(&seq, &k.tenant, &k.status, &ref); err != nil {
				rows.Close()
				return err
			}
			seqs, counted = append(seqs, seq), append(counted, k)
			if ref != "" {
				refs = append(refs, ref)
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM attempts WHERE task_seq IN (%s)`,
			`DELETE FROM task_payloads WHERE task_seq IN (%s)`, `DELETE FROM tasks WHERE seq IN (%s)`} {
			if err := w.inList(q, nil, seqs, nil); err != nil {
				return err
			}
		}
		for _, k := range counted {
			w.move(k.tenant, k.status, "")
		}
		n = len(seqs)
		return nil
	}})
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: purge: %w", err)
	}
	slices.Sort(refs)
	return slices.Compact(refs), n, nil
}

// refsChunk is how many references one BodyRefsInUse query asks about.
const refsChunk = 256

// BodyRefsInUse tells which of refs some task holds; see store.Purger.
func (s *Store) BodyRefsInUse(ctx context.Context, refs []string) (map[string]bool, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	out := map[string]bool{}
	for chunk := range slices.Chunk(refs, refsChunk) {
		// Padded to a power of two with NULLs, which no IN matches, so
		// that few shapes are prepared; body_ref != '' lets SQLite use
		// the partial index.
		k := 1
		for k < len(chunk) {
			k *= 2
		}
		st, err := s.read(ctx, `SELECT DISTINCT body_ref FROM task_payloads INDEXED BY task_payloads_body_ref
			WHERE body_ref != '' AND body_ref IN (`+strings.Repeat("?, ", k-1)+`?)`)
		if err != nil {
			return nil, fmt.Errorf("sqlite: body refs in use: %w", err)
		}
		args := make([]any, k)
		for i, r := range chunk {
			args[i] = r
		}
		if err := collectRefs(ctx, st, args, out); err != nil {
			return nil, fmt.Errorf("sqlite: body refs in use: %w", err)
		}
	}
	return out, nil
}

func collectRefs(ctx context.Context, st *sql.Stmt, args []any, out map[string]bool) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			return err
		}
		out[ref] = true
	}
	return rows.Err()
}

var _ store.Purger = (*Store)(nil)
