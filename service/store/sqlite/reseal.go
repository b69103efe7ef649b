package sqlite

import (
	"context"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/headerjson"
)

// A reseal walks task_payloads by its primary key, keeping the rows whose
// headers (JSON text) hold the sealed prefix: LIKE filters in SQLite, so
// only those rows come back, and HasSealed then tests them exactly (LIKE
// ignores case). The writes are compare-and-swaps on the headers' text,
// through the writer like every write.

// resealTasks reads the next batch of tasks that may hold sealed headers.
const resealTasks = `SELECT p.task_seq, t.id, t.tenant, p.headers FROM task_payloads p
	JOIN tasks t ON t.seq = p.task_seq
	WHERE p.task_seq > ? AND p.headers LIKE ? ORDER BY p.task_seq LIMIT ?`

// resealed is one task's headers to write: its payload row, the headers'
// text as read, and the text to write.
type resealed struct {
	seq       int64
	was, next string
}

// TaskHeadersReseal seals again the sealed values of tasks' headers; see
// store.TaskHeaderResealer.
func (s *Store) TaskHeadersReseal(ctx context.Context, change store.HeaderChange) (int, error) {
	n := 0
	var after int64
	for {
		// The headers change changed before it failed are written all
		// the same: they were sealed again as asked.
		batch, last, err := s.resealBatch(ctx, after, change)
		if len(batch) > 0 {
			wrote, werr := s.resealWrite(ctx, batch)
			n += wrote
			if err == nil {
				err = werr
			}
		}
		if err != nil {
			return n, fmt.Errorf("sqlite: reseal task headers: %w", err)
		}
		if last == 0 {
			return n, nil
		}
		after = last
	}
}

// resealBatch reads up to store.ResealBatch tasks after seq after whose
// headers may hold sealed values, and returns the headers change changed,
// and the last seq read (0 when the walk is over).
func (s *Store) resealBatch(ctx context.Context, after int64, change store.HeaderChange) ([]resealed, int64, error) {
	type found struct {
		seq              int64
		id, tenant, text string
	}
	st, err := s.read(ctx, resealTasks)
	if err != nil {
		return nil, 0, err
	}
	rows, err := st.QueryContext(ctx, after, "%"+store.SealedPrefix+"%", store.ResealBatch)
	if err != nil {
		return nil, 0, err
	}
	var read []found
	for rows.Next() {
		var f found
		if err := rows.Scan(&f.seq, &f.id, &f.tenant, &f.text); err != nil {
			rows.Close()
			return nil, 0, err
		}
		read = append(read, f)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	// The rows are closed before change runs, so that it may use the
	// store (and, in a test, close it) without waiting on this read.
	var out []resealed
	for _, f := range read {
		h, err := headerjson.Decode([]byte(f.text))
		if err != nil {
			return nil, 0, fmt.Errorf("task %s: %w", f.id, err)
		}
		if !store.HasSealed(h) {
			continue
		}
		next, changed, err := change(f.tenant, f.id, h)
		if err != nil {
			return out, 0, err
		}
		if !changed {
			continue
		}
		text, err := headerjson.Encode(next)
		if err != nil {
			return out, 0, fmt.Errorf("task %s: %w", f.id, err)
		}
		out = append(out, resealed{seq: f.seq, was: f.text, next: text})
	}
	if len(read) < store.ResealBatch {
		return out, 0, nil
	}
	return out, read[len(read)-1].seq, nil
}

// resealWrite writes the headers of batch, each only where they are still
// those read, in one transaction, and returns how many it wrote.
func (s *Store) resealWrite(ctx context.Context, batch []resealed) (int, error) {
	var n int
	err := s.write(ctx, &writeOp{run: func(w *wtx) error {
		n = 0 // the writer may run this again (see runBatch)
		for _, r := range batch {
			res, err := w.exec(`UPDATE task_payloads SET headers = ? WHERE task_seq = ? AND headers = ?`, r.next, r.seq, r.was)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(k)
		}
		return nil
	}})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// destinationsAfter reads the next batch of destinations of all tenants,
// along the primary key.
const destinationsAfter = `SELECT tenant, id FROM destinations WHERE (tenant, id) > (?, ?)
	ORDER BY tenant, id LIMIT ?`

// DestinationEach calls each with every destination's tenant and ID, in
// their order; see store.DestinationWalker.
func (s *Store) DestinationEach(ctx context.Context, each func(tenant, id string) error) error {
	type key struct{ tenant, id string }
	var last key
	for {
		st, err := s.read(ctx, destinationsAfter)
		if err != nil {
			return fmt.Errorf("sqlite: walk destinations: %w", err)
		}
		rows, err := st.QueryContext(ctx, last.tenant, last.id, store.ResealBatch)
		if err != nil {
			return fmt.Errorf("sqlite: walk destinations: %w", err)
		}
		var batch []key
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.tenant, &k.id); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: walk destinations: %w", err)
			}
			batch = append(batch, k)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: walk destinations: %w", err)
		}
		for _, k := range batch {
			if err := each(k.tenant, k.id); err != nil {
				return fmt.Errorf("sqlite: walk destinations: %w", err)
			}
		}
		if len(batch) < store.ResealBatch {
			return nil
		}
		last = batch[len(batch)-1]
	}
}

var (
	_ store.TaskHeaderResealer = (*Store)(nil)
	_ store.DestinationWalker  = (*Store)(nil)
)
