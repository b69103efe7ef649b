package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// candidate is a due task TaskClaim may take.
type candidate struct {
	seq     int64
	due     int64 // NextAttemptAt, or LeaseUntil for an expired lease
	expired bool
}

// claimed is a task TaskClaim took, with where it stands in the order the
// tasks are handed out.
type claimed struct {
	candidate
	t *store.Task
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
	var later []store.Due
	err := s.write(ctx, &writeOp{run: func(w *wtx) (err error) {
		out, err = w.claimDue(p, epochms.Of(now), epochms.Of(now.Add(p.Lease)), limit)
		if err == nil && p.Later != nil && len(out) < len(p.IDs) {
			later, err = w.unclaimed(p.Unclaimed(out))
		}
		return err
	}})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim: %w", err)
	}
	for _, d := range later {
		p.Later(d)
	}
	return out, nil
}

// unclaimed returns when each live task of ids is due.
func (w *wtx) unclaimed(ids []string) ([]store.Due, error) {
	var out []store.Due
	err := w.inList(`SELECT id, wake_at, version FROM tasks INDEXED BY tasks_id WHERE state = 'LIVE' AND id IN (%s)`,
		nil, anys(ids), func(rows *sql.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var d store.Due
				var wake int64
				if err := rows.Scan(&d.ID, &wake, &d.Version); err != nil {
					return err
				}
				d.At = epochms.Time(wake)
				out = append(out, d)
			}
			return rows.Err()
		})
	return out, err
}

// claimDue claims up to limit due tasks (among p.IDs, when there are
// some), earliest due first.
func (w *wtx) claimDue(p store.ClaimParams, now, leaseUntil int64, limit int) ([]*store.Task, error) {
	ids := p.IDs
	var got []claimed
	if len(ids) > 0 && limit >= len(ids) {
		// The common case, a scheduler naming the tasks its heap says are
		// due: each is looked up once, by one UPDATE. It takes only
		// PENDING tasks, since an expired lease must log its lost attempt
		// from the values the claim overwrites; those, and IDs that are
		// not due, go the general way below.
		var err error
		if got, err = w.claimPending(ids, now, leaseUntil); err != nil {
			return nil, err
		}
		if len(got) == len(ids) {
			return w.withPayloads(got, p.OmitRequest)
		}
		taken := make(map[string]bool, len(got))
		for _, c := range got {
			taken[c.t.ID] = true
		}
		ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return taken[id] })
		if len(ids) == 0 { // they were repeats
			return w.withPayloads(got, p.OmitRequest)
		}
		limit -= len(got)
	}
	if limit > 0 {
		cands, err := w.dueCandidates(ids, now, limit)
		if err != nil {
			return nil, err
		}
		more, err := w.claim(cands, now, leaseUntil)
		if err != nil {
			return nil, err
		}
		got = append(got, more...)
	}
	return w.withPayloads(got, p.OmitRequest)
}

// claimPendingSQL claims the PENDING tasks of a list of IDs that are due
// (?1 now, ?2 the lease's end). tasks_id is named because the planner,
// without statistics, would rather walk every live task by state.
const claimPendingSQL = `UPDATE OR FAIL tasks INDEXED BY tasks_id SET status = 'IN_FLIGHT', wake_at = ?2, lease_until = ?2,
	claimed_at = ?1, updated_at = ?1, attempt_number = attempt_number + 1, version = version + 1
	WHERE id IN (%s) AND state = 'LIVE' AND status = 'PENDING' AND wake_at <= ?1 RETURNING ` + hotCols

func (w *wtx) claimPending(ids []string, now, leaseUntil int64) ([]claimed, error) {
	var got []claimed
	err := w.inList(claimPendingSQL, []any{now, leaseUntil}, anys(ids), func(rows *sql.Rows) (err error) {
		got, err = scanClaimed(rows, got)
		return err
	})
	for i := range got {
		got[i].due = epochms.Of(got[i].t.NextAttemptAt)
		w.move(got[i].t.Tenant, store.Pending, store.InFlight)
	}
	return got, err
}

// dueCandidates returns up to limit due tasks, among ids when there are
// some, earliest due first.
func (w *wtx) dueCandidates(ids []string, now int64, limit int) ([]candidate, error) {
	var cands []candidate
	collect := func(rows *sql.Rows) error {
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
	var err error
	if len(ids) > 0 {
		err = w.inList(`SELECT seq, wake_at, status = 'IN_FLIGHT' FROM tasks INDEXED BY tasks_id
			WHERE wake_at <= ?1 AND state = 'LIVE' AND id IN (%s)`, []any{now}, anys(ids), collect)
	} else {
		var rows *sql.Rows
		if rows, err = w.query(`SELECT seq, wake_at, status = 'IN_FLIGHT' FROM tasks INDEXED BY tasks_wake
			WHERE state = 'LIVE' AND wake_at <= ? ORDER BY wake_at LIMIT ?`, now, limit); err == nil {
			err = collect(rows)
		}
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(cands, candidate.compare)
	return cands[:min(len(cands), limit)], nil
}

func (a candidate) compare(b candidate) int {
	return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq))
}

// claim leases cands, tasks of any state that dueCandidates found due. An
// expired lease's lost attempt is logged first, from the claim it ends.
func (w *wtx) claim(cands []candidate, now, leaseUntil int64) ([]claimed, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	seqs := make([]any, len(cands))
	var expired []any
	for i, c := range cands {
		seqs[i] = c.seq
		if c.expired {
			expired = append(expired, c.seq)
		}
	}
	if err := w.inList(`INSERT OR FAIL INTO attempts (task_seq, n, attempt_number, started_at, duration_ns,
		response_status, error_message, response_body)
		SELECT seq, log_count, attempt_number, claimed_at, (lease_until - claimed_at) * 1000000, 0, ?1, ''
		FROM tasks WHERE seq IN (%s)`, []any{store.LeaseExpiredMessage}, expired, nil); err != nil {
		return nil, err
	}
	var got []claimed
	err := w.inList(`UPDATE OR FAIL tasks SET status = 'IN_FLIGHT', wake_at = ?1, lease_until = ?1, claimed_at = ?2,
		updated_at = ?2, attempt_number = attempt_number + 1, version = version + 1,
		log_count = log_count + (status = 'IN_FLIGHT'),
		last_error = iif(status = 'IN_FLIGHT', ?3, last_error)
		WHERE seq IN (%s) RETURNING `+hotCols, []any{leaseUntil, now, store.LeaseExpiredMessage}, seqs,
		func(rows *sql.Rows) (err error) {
			got, err = scanClaimed(rows, got)
			return err
		})
	if err != nil {
		return nil, err
	}
	due := make(map[int64]candidate, len(cands))
	for _, c := range cands {
		due[c.seq] = c
	}
	for i := range got {
		got[i].candidate = due[got[i].seq]
		if !got[i].expired { // an expired lease stays IN_FLIGHT
			w.move(got[i].t.Tenant, store.Pending, store.InFlight)
		}
	}
	return got, nil
}

// scanClaimed appends the tasks of rows of hotCols to got and closes rows.
func scanClaimed(rows *sql.Rows, got []claimed) ([]claimed, error) {
	defer rows.Close()
	r := make(row, hotLen)
	dest := r.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return got, err
		}
		var c claimed
		c.t, c.seq = r.hot(0)
		got = append(got, c)
	}
	return got, rows.Err()
}

// withPayloads returns the claimed tasks earliest due first, with their
// requests unless omit.
func (w *wtx) withPayloads(got []claimed, omit bool) ([]*store.Task, error) {
	if len(got) == 0 {
		return nil, nil
	}
	slices.SortFunc(got, func(a, b claimed) int { return a.compare(b.candidate) })
	out := make([]*store.Task, len(got))
	for i, c := range got {
		out[i] = c.t
	}
	if omit {
		return out, nil
	}
	bySeq := make(map[int64]*store.Task, len(got))
	seqs := make([]any, len(got))
	for i, c := range got {
		bySeq[c.seq] = c.t
		seqs[i] = c.seq
	}
	err := w.inList(`SELECT task_seq, `+payloadCols+` FROM task_payloads WHERE task_seq IN (%s)`, nil, seqs,
		func(rows *sql.Rows) error {
			defer rows.Close()
			r := make(row, 1+payloadLen)
			dest := r.dest()
			for rows.Next() {
				if err := rows.Scan(dest...); err != nil {
					return err
				}
				if t, ok := bySeq[r.int(0)]; ok {
					p := r.payload(1)
					if err := p.apply(t); err != nil {
						return err
					}
				}
			}
			return rows.Err()
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}
