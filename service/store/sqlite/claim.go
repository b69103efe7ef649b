package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/retrykit/retry/service/store"
)

// candidate is a due task TaskClaim may take.
type candidate struct {
	seq     int64
	due     int64 // NextAttemptAt, or LeaseUntil for an expired lease
	expired bool
}

// TaskClaim leases due tasks; see store.Store. It runs a few statements per
// call whatever the number of tasks, inside one transaction.
func (s *Store) TaskClaim(ctx context.Context, p store.ClaimParams) ([]*store.Task, error) {
	limit := p.ClaimLimit()
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	var out []*store.Task
	err := s.write(ctx, &writeOp{run: func(w *wtx) error {
		cands, err := w.dueCandidates(p.IDs, ms(now), limit)
		if err != nil || len(cands) == 0 {
			return err
		}
		out, err = w.claim(cands, ms(now), ms(now.Add(p.Lease)))
		return err
	}})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	return out, nil
}

// dueCandidates returns up to limit due tasks, earliest due first.
func (w *wtx) dueCandidates(ids []string, now int64, limit int) ([]candidate, error) {
	var cands []candidate
	collect := func(rows *sql.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.seq, &c.due, &c.expired); err != nil {
				return err
			}
			cands = append(cands, c)
		}
		return rows.Err()
	}
	if len(ids) > 0 {
		err := collect(w.query(`SELECT seq, wake_at, status = 'IN_FLIGHT' FROM tasks INDEXED BY tasks_id
			WHERE id IN (SELECT CAST(unhex(value) AS TEXT) FROM json_each(?)) AND state = 'LIVE' AND wake_at <= ?`,
			hexList(ids), now))
		if err != nil {
			return nil, err
		}
	} else if err := collect(w.query(`SELECT seq, wake_at, status = 'IN_FLIGHT' FROM tasks INDEXED BY tasks_wake
		WHERE state = 'LIVE' AND wake_at <= ? ORDER BY wake_at LIMIT ?`, now, limit)); err != nil {
		return nil, err
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq))
	})
	return cands[:min(len(cands), limit)], nil
}

// claim leases cands. An expired lease's lost attempt is logged first.
func (w *wtx) claim(cands []candidate, now, leaseUntil int64) ([]*store.Task, error) {
	seqs := make([]int64, len(cands))
	var expired []int64
	for i, c := range cands {
		seqs[i] = c.seq
		if c.expired {
			expired = append(expired, c.seq)
		} else {
			w.move(store.Pending, store.InFlight)
		}
	}
	if len(expired) > 0 {
		if _, err := w.exec(`INSERT INTO attempts (task_seq, n, attempt_number, started_at, duration_ns,
			response_status, error_message, response_body)
			SELECT seq, log_count, attempt_number, claimed_at, (lease_until - claimed_at) * 1000000, 0, ?, ''
			FROM tasks WHERE seq IN (SELECT value FROM json_each(?))`,
			store.LeaseExpiredMessage, jsonInts(expired)); err != nil {
			return nil, err
		}
	}
	list := jsonInts(seqs)
	rows, err := w.query(`UPDATE tasks SET status = 'IN_FLIGHT', wake_at = ?1, lease_until = ?1, claimed_at = ?2,
		updated_at = ?2, attempt_number = attempt_number + 1, version = version + 1,
		log_count = log_count + (status = 'IN_FLIGHT'),
		last_error = iif(status = 'IN_FLIGHT', ?3, last_error)
		WHERE seq IN (SELECT value FROM json_each(?4)) RETURNING `+hotCols,
		leaseUntil, now, store.LeaseExpiredMessage, list)
	if err != nil {
		return nil, err
	}
	bySeq := make(map[int64]*store.Task, len(cands))
	err = func() error {
		defer rows.Close()
		for rows.Next() {
			t := &store.Task{}
			var seq int64
			var r rawTimes
			if err := rows.Scan(hotFields(t, &seq, &r)...); err != nil {
				return err
			}
			r.apply(t)
			bySeq[seq] = t
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, err
	}
	if err := w.payloads(list, bySeq); err != nil {
		return nil, err
	}
	out := make([]*store.Task, 0, len(cands))
	for _, c := range cands {
		if t, ok := bySeq[c.seq]; ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// payloads fills in the request of each task of bySeq.
func (w *wtx) payloads(list string, bySeq map[int64]*store.Task) error {
	rows, err := w.query(`SELECT task_seq, `+payloadCols+` FROM task_payloads
		WHERE task_seq IN (SELECT value FROM json_each(?))`, list)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var p payload
		if err := rows.Scan(append([]any{&seq}, p.fields()...)...); err != nil {
			return err
		}
		if t, ok := bySeq[seq]; ok {
			if err := p.apply(t); err != nil {
				return err
			}
		}
	}
	return rows.Err()
}
