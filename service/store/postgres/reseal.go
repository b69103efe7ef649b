package postgres

import (
	"context"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/headerjson"
)

// A reseal walks retry_tasks by seq, its primary key, keeping the rows
// whose headers hold the sealed prefix. headers is json, which keeps its
// text as written, so headers::text is what the store wrote: LIKE filters
// on the server, and the write is a compare-and-swap on that text. json
// has no equality operator; its text has. A batch is written in one
// statement, which touches retry_tasks alone: claims and retries, which
// write retry_runs only, never wait on it.

// TaskHeadersReseal seals again the sealed values of tasks' headers; see
// store.TaskHeaderResealer.
func (s *Store) TaskHeadersReseal(ctx context.Context, change store.HeaderChange) (int, error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	n := 0
	var after int64
	for {
		// The headers change changed before it failed are written all
		// the same: they were sealed again as asked.
		batch, last, err := s.resealBatch(ctx, after, change)
		if len(batch.seqs) > 0 {
			wrote, werr := s.resealWrite(ctx, batch)
			n += wrote
			if err == nil {
				err = werr
			}
		}
		if err != nil {
			return n, s.fail("reseal task headers", err)
		}
		if last == 0 {
			return n, nil
		}
		after = last
	}
}

// resealed is a batch of headers to write, by column: the tasks' seqs,
// the headers' text as read, and the text to write.
type resealed struct {
	seqs      []int64
	was, next []string
}

// resealBatch reads up to store.ResealBatch tasks after seq after whose
// headers may hold sealed values, and returns the headers change changed,
// and the last seq read (0 when the walk is over).
func (s *Store) resealBatch(ctx context.Context, after int64, change store.HeaderChange) (resealed, int64, error) {
	type found struct {
		seq              int64
		id, tenant, text string
	}
	var out resealed
	rows, err := s.pool.Query(ctx, `SELECT seq, id, tenant, headers::text FROM retry_tasks
		WHERE seq > $1 AND headers::text LIKE $2 ORDER BY seq LIMIT $3`,
		after, "%"+store.SealedPrefix+"%", store.ResealBatch)
	if err != nil {
		return out, 0, err
	}
	var read []found
	for rows.Next() {
		var f found
		if err := rows.Scan(&f.seq, &f.id, &f.tenant, &f.text); err != nil {
			rows.Close()
			return out, 0, err
		}
		read = append(read, f)
	}
	if err := rows.Err(); err != nil {
		return out, 0, err
	}
	// The rows are closed, and their connection back in the pool, before
	// change runs, so that it may use the store.
	for _, f := range read {
		h, err := headerjson.Decode([]byte(f.text))
		if err != nil {
			return out, 0, fmt.Errorf("task %s: %w", f.id, err)
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
		out.seqs, out.was, out.next = append(out.seqs, f.seq), append(out.was, f.text), append(out.next, text)
	}
	if len(read) < store.ResealBatch {
		return out, 0, nil
	}
	return out, read[len(read)-1].seq, nil
}

// resealWrite writes the headers of batch, each only where they are still
// those read, and returns how many it wrote.
func (s *Store) resealWrite(ctx context.Context, b resealed) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE retry_tasks t SET headers = v.next::json
		FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(seq, was, next)
		WHERE t.seq = v.seq AND t.headers::text = v.was`, b.seqs, b.was, b.next)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// DestinationEach calls each with every destination's tenant and ID, in
// their order; see store.DestinationWalker.
func (s *Store) DestinationEach(ctx context.Context, each func(tenant, id string) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	type key struct{ tenant, id string }
	var last key
	for {
		rows, err := s.pool.Query(ctx, `SELECT tenant, id FROM retry_destinations
			WHERE (tenant, id) > ($1, $2) ORDER BY tenant, id LIMIT $3`, last.tenant, last.id, store.ResealBatch)
		if err != nil {
			return s.fail("walk destinations", err)
		}
		var batch []key
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.tenant, &k.id); err != nil {
				rows.Close()
				return s.fail("walk destinations", err)
			}
			batch = append(batch, k)
		}
		if err := rows.Err(); err != nil {
			return s.fail("walk destinations", err)
		}
		for _, k := range batch {
			if err := each(k.tenant, k.id); err != nil {
				return fmt.Errorf("postgres: walk destinations: %w", err)
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
