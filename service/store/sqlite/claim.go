package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
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
		err := collect(w.query(`SELECT seq, wake_at, status = 'IN_FLIGHT' FROM tasks
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

// finishRef is one Finish item of a TaskFinish op.
type finishRef struct {
	op *writeOp
	i  int
}

func (r finishRef) f() *store.Finish { return &r.op.finish[r.i] }

// finishMerged applies the items of every TaskFinish op of a batch with a
// few statements per round. A round holds each task once: the second
// Finish of a task waits for the next round, so items apply in order.
func finishMerged(w *wtx, ops []*writeOp) error {
	var items []finishRef
	for _, op := range ops {
		clear(op.errs)
		for i := range op.finish {
			items = append(items, finishRef{op, i})
		}
	}
	for len(items) > 0 {
		seen := make(map[string]bool, len(items))
		var round, later []finishRef
		for _, r := range items {
			if id := r.f().TaskID; seen[id] {
				later = append(later, r)
			} else {
				seen[id] = true
				round = append(round, r)
			}
		}
		if err := w.finishRound(round); err != nil {
			return err
		}
		items = later
	}
	return nil
}

// finishRound applies items of distinct tasks: one UPDATE for the retries,
// one for the others, one INSERT for their attempts, each with its rows
// bound as VALUES (see bulk).
func (w *wtx) finishRound(items []finishRef) error {
	byID := make(map[string]finishRef, len(items))
	var retries, ends [][]any
	for _, r := range items {
		f := r.f()
		switch f.Status {
		case store.Succeeded, store.Pending, store.Exhausted, store.Failed:
		default:
			r.op.errs[r.i] = fmt.Errorf("finish as %q: %w", f.Status, store.ErrInvalid)
			continue
		}
		byID[f.TaskID] = r
		now := f.Now
		if now.IsZero() {
			now = time.Now()
		}
		next := ms(now)
		if !f.NextAttemptAt.IsZero() {
			next = ms(f.NextAttemptAt)
		}
		row := []any{f.TaskID, f.Version, string(f.Status), next, int64(f.PrevDelay), f.LastError,
			f.LastStatus, ms(now), min(f.Attempt.AttemptNumber, 1)}
		if f.Status == store.Pending {
			retries = append(retries, row)
		} else {
			ends = append(ends, row)
		}
	}
	var attempts [][]any
	collect := func(rows *sql.Rows) error {
		var err error
		attempts, err = w.finished(rows, byID, attempts)
		return err
	}
	// Two statements, because SQLite updates every index that mentions a
	// column the SET list names, whatever its new value: a retry must not
	// name state.
	if err := w.bulk(finishRetrySQL, 9, retries, collect); err != nil {
		return err
	}
	if err := w.bulk(finishEndSQL, 9, ends, collect); err != nil {
		return err
	}
	if err := w.bulk(attemptInsertSQL, 8, attempts, nil); err != nil {
		return err
	}
	return w.refuse(byID)
}

const finishUpdateSQL = `WITH v(v_id, v_version, v_status, v_next, v_prev_delay, v_last_error, v_last_status, v_now,
		v_logged) AS (VALUES %s)
	UPDATE tasks SET %s, prev_delay_ns = v_prev_delay, last_error = v_last_error, last_status = v_last_status,
		lease_until = 0, updated_at = v_now, version = version + 1, log_count = log_count + v_logged
	FROM v WHERE id = v_id AND version = v_version AND status = 'IN_FLIGHT'
	RETURNING id, seq, log_count`

var (
	finishRetrySQL = fmt.Sprintf(finishUpdateSQL, "%s",
		"status = 'PENDING', wake_at = v_next, next_attempt_at = v_next")
	finishEndSQL = fmt.Sprintf(finishUpdateSQL, "%s",
		"state = v_status, status = v_status, finished_at = v_now")
)

const attemptInsertSQL = `INSERT INTO attempts (task_seq, n, attempt_number, started_at, duration_ns,
	response_status, error_message, response_body) VALUES %s`

// finished reads the tasks an UPDATE of finishRound changed, counts them
// and appends the rows of their attempts to attempts.
// What is left in byID was not changed.
func (w *wtx) finished(rows *sql.Rows, byID map[string]finishRef, attempts [][]any) ([][]any, error) {
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq, n int64
		if err := rows.Scan(&id, &seq, &n); err != nil {
			return nil, err
		}
		r := byID[id]
		delete(byID, id)
		f := r.f()
		w.move(store.InFlight, f.Status)
		if a := &f.Attempt; a.AttemptNumber > 0 {
			attempts = append(attempts, []any{seq, n - 1, a.AttemptNumber, ms(a.StartedAt), int64(a.Duration),
				a.ResponseStatus, a.ErrorMessage, a.ResponseBody})
		}
	}
	return attempts, rows.Err()
}

// refuse sets the errors of the items the UPDATE did not apply: their task
// moved on (ErrLeaseLost) or never was (ErrNotFound).
func (w *wtx) refuse(byID map[string]finishRef) error {
	if len(byID) == 0 {
		return nil
	}
	ids := make([]string, 0, len(byID))
	for id, r := range byID {
		ids = append(ids, id)
		r.op.errs[r.i] = fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	rows, err := w.query(`SELECT id FROM tasks WHERE id IN (SELECT CAST(unhex(value) AS TEXT) FROM json_each(?))`,
		hexList(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		r := byID[id]
		r.op.errs[r.i] = fmt.Errorf("task %s version %d: %w", id, r.f().Version, store.ErrLeaseLost)
	}
	return rows.Err()
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

// hexList is a JSON array of the strings in hex, which SQL turns back into
// the very same bytes with unhex: JSON itself cannot carry invalid UTF-8.
func hexList(v []string) string {
	b := make([]byte, 0, len(v)*75+2)
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, []byte(s))
		b = append(b, '"')
	}
	return string(append(b, ']'))
}
