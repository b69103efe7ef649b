package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
		err := collect(w.query(`SELECT seq, iif(status = 'PENDING', next_attempt_at, lease_until), status = 'IN_FLIGHT'
			FROM tasks WHERE id IN (SELECT value FROM json_each(?1))
			AND ((status = 'PENDING' AND next_attempt_at <= ?2) OR (status = 'IN_FLIGHT' AND lease_until <= ?2))`,
			jsonStrings(ids), now))
		if err != nil {
			return nil, err
		}
	} else {
		// Two index range scans, each already in due order, merged below.
		if err := collect(w.query(`SELECT seq, next_attempt_at, 0 FROM tasks
			WHERE status = 'PENDING' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`, now, limit)); err != nil {
			return nil, err
		}
		if err := collect(w.query(`SELECT seq, lease_until, 1 FROM tasks
			WHERE status = 'IN_FLIGHT' AND lease_until <= ? ORDER BY lease_until LIMIT ?`, now, limit)); err != nil {
			return nil, err
		}
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
	rows, err := w.query(`UPDATE tasks SET status = 'IN_FLIGHT', lease_until = ?1, claimed_at = ?2,
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

// TaskFinish records outcomes of claimed attempts; see store.Store.
// Concurrent calls share one transaction (see the package documentation).
func (s *Store) TaskFinish(ctx context.Context, fs []store.Finish) ([]error, error) {
	if len(fs) == 0 {
		return []error{}, nil
	}
	op := &writeOp{finish: fs, errs: make([]error, len(fs))}
	if err := s.write(ctx, op); err != nil {
		return nil, fmt.Errorf("sqlite: finish: %w", err)
	}
	return op.errs, nil
}

// finishMerged applies the items of every TaskFinish op of a batch, in
// order, with one prepared UPDATE (and INSERT) per item.
func finishMerged(w *wtx, ops []*writeOp) error {
	for _, op := range ops {
		clear(op.errs)
		for i := range op.finish {
			err := w.finishOne(&op.finish[i])
			var ie itemError
			if errors.As(err, &ie) {
				op.errs[i] = ie.err
				continue
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// itemError is a failure of one Finish item, not of the transaction.
type itemError struct{ err error }

func (e itemError) Error() string { return e.err.Error() }

func (w *wtx) finishOne(f *store.Finish) error {
	switch f.Status {
	case store.Succeeded, store.Pending, store.Exhausted, store.Failed:
	default:
		return itemError{fmt.Errorf("finish as %q: %w", f.Status, store.ErrInvalid)}
	}
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	next, finished := int64(0), ms(now)
	if f.Status == store.Pending {
		next, finished = ms(now), 0
		if !f.NextAttemptAt.IsZero() {
			next = ms(f.NextAttemptAt)
		}
	}
	logged := 0
	if f.Attempt.AttemptNumber > 0 {
		logged = 1
	}
	var seq, n int64
	err := w.queryRow(`UPDATE tasks SET status = ?1, next_attempt_at = iif(?2 = 0, next_attempt_at, ?2),
		prev_delay_ns = ?3, last_error = ?4, last_status = ?5, lease_until = 0, updated_at = ?6,
		finished_at = ?7, version = version + 1, log_count = log_count + ?8
		WHERE id = ?9 AND version = ?10 AND status = 'IN_FLIGHT' RETURNING seq, log_count`,
		string(f.Status), next, int64(f.PrevDelay), f.LastError, f.LastStatus, ms(now),
		finished, logged, f.TaskID, f.Version).Scan(&seq, &n)
	if errors.Is(err, sql.ErrNoRows) {
		var one int
		err := w.queryRow(`SELECT 1 FROM tasks WHERE id = ?`, f.TaskID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return itemError{fmt.Errorf("task %s: %w", f.TaskID, store.ErrNotFound)}
		case err != nil:
			return err
		}
		return itemError{fmt.Errorf("task %s version %d: %w", f.TaskID, f.Version, store.ErrLeaseLost)}
	}
	if err != nil {
		return err
	}
	w.move(store.InFlight, f.Status)
	if logged == 0 {
		return nil
	}
	a := &f.Attempt
	_, err = w.exec(`INSERT INTO attempts (task_seq, n, attempt_number, started_at, duration_ns,
		response_status, error_message, response_body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		seq, n-1, a.AttemptNumber, ms(a.StartedAt), int64(a.Duration), a.ResponseStatus, a.ErrorMessage, a.ResponseBody)
	return err
}

func jsonInts(v []int64) string {
	b := make([]byte, 0, len(v)*8+2)
	b = append(b, '[')
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, ']'))
}

func jsonStrings(v []string) string {
	b, _ := json.Marshal(v) // a []string always encodes
	return string(b)
}
