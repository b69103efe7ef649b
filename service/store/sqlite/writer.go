package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/linger"
)

// maxBatchOps bounds how many write operations share one transaction, so
// that no caller waits behind an unbounded batch.
const maxBatchOps = 256

// writeOp is one write method call waiting for the writer. A TaskFinish
// call carries its items in finish instead of run, so that the writer can
// merge every TaskFinish of a batch into one set of statements. run may be
// called more than once, in successive transactions (see runBatch), so it
// must set all its results each time.
type writeOp struct {
	ctx context.Context
	run func(*wtx) error
	// create is a TaskCreateBatch call's items. It keeps its refusals in
	// results of its own and fails only when the transaction must not
	// commit, so the creates of a batch run as one unit (createMerged):
	// one createAll over all their items, without the cost of telling a
	// refusal from a failure after each (see try).
	create *createCall
	finish []store.Finish
	errs   []error    // finish's per-item results
	done   chan error // buffered: the writer never blocks on a caller
}

// wtx is the write connection and what the operation running on it has
// changed in the task counts.
type wtx struct {
	conn      *sql.Conn
	stmts     map[string]*sql.Stmt
	bulkStmts map[bulkKey]*sql.Stmt
	delta     map[countKey]int64
}

// countKey is a tenant's count of one status: the unit the writes change
// the counts in, and the key of a row of tenant_counts.
type countKey struct {
	tenant string
	status store.Status
}

// write queues run for the writer and waits for the commit that makes it
// durable (or for run's error: its changes are then rolled back).
func (s *Store) write(ctx context.Context, op *writeOp) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	op.ctx = ctx
	op.done = make(chan error, 1)
	select {
	case s.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return store.ErrClosed
	}
	// Once taken, an operation is answered even if ctx ends meanwhile: its
	// outcome is known soon, and the caller must not guess it.
	return <-op.done
}

// writeLoop runs on its own goroutine until Close: it takes the waiting
// operations, runs them in one transaction and answers them after COMMIT.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, maxBatchOps)
	var g linger.Gather
	for {
		select {
		case op := <-s.ops:
			batch = append(batch[:0], op)
		case <-s.quit:
			return
		}
		s.fill(&batch)
		wait, want := g.Wait(len(batch), linger.Max)
		short := wait > 0 && s.await(&batch, wait, want)
		began := time.Now()
		s.runBatch(batch)
		g.Committed(began, len(batch), wait > 0, short)
	}
}

// runBatch runs ops in one transaction. An op that fails is rolled back
// alone: if it wrote nothing, its error is simply its answer; if it did,
// the transaction is rolled back and the others run again without it.
// (Savepoints would do the same, but cost two statements per op and a
// copy of every page an op touches first.)
func (s *Store) runBatch(ops []*writeOp) {
	// units are what runs: each op with a run func, all creates as one and
	// all finishes as one.
	var units []func(*wtx) error
	var owners [][]*writeOp
	finishAt, createAt := -1, -1
	var finishes, creates []*writeOp
	for _, op := range ops {
		switch {
		case op.ctx.Err() != nil:
			op.done <- op.ctx.Err()
		case op.create != nil:
			if createAt < 0 {
				createAt = len(units)
				units = append(units, nil)
				owners = append(owners, nil)
			}
			creates = append(creates, op)
		case op.run != nil:
			units = append(units, op.run)
			owners = append(owners, []*writeOp{op})
		default:
			if finishAt < 0 {
				finishAt = len(units)
				units = append(units, nil)
				owners = append(owners, nil)
			}
			finishes = append(finishes, op)
		}
	}
	if finishAt >= 0 {
		units[finishAt] = func(w *wtx) error { return finishMerged(w, finishes) }
		owners[finishAt] = finishes
	}
	if createAt >= 0 {
		units[createAt] = func(w *wtx) error { return createMerged(w, creates) }
		owners[createAt] = creates
	}
	if len(units) == 0 {
		return
	}
	results := make([]error, len(units))
	failed := make([]bool, len(units)) // failed after writing: left out of the next try
	for {
		wrote, redo, err := s.w.try(units, results, failed)
		if redo {
			continue
		}
		if err == nil && wrote {
			if _, err = s.w.exec("COMMIT"); err != nil {
				err = fmt.Errorf("sqlite: commit: %w", err)
			}
		}
		if err != nil || !wrote {
			_, _ = s.w.exec("ROLLBACK")
		}
		answer(owners, results, err)
		return
	}
}

// try runs units but the failed ones in a new transaction, setting their
// results, and applies their task count changes. It leaves the transaction
// open for the caller to end, unless a unit failed after writing: it then
// rolls back, marks that unit failed and asks for a redo. wrote reports
// whether a unit succeeded; err is for the transaction as a whole.
func (w *wtx) try(units []func(*wtx) error, results []error, failed []bool) (wrote, redo bool, err error) {
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return false, false, fmt.Errorf("sqlite: begin: %w", err)
	}
	total := map[countKey]int64{}
	shared := len(units)-count(failed) > 1
	for i, unit := range units {
		if failed[i] {
			continue
		}
		var before int64
		if shared { // alone, a unit's failure rolls back the transaction
			if before, err = w.changes(); err != nil {
				return false, false, err
			}
		}
		clear(w.delta)
		if w.delta == nil {
			w.delta = map[countKey]int64{}
		}
		if results[i] = unit(w); results[i] == nil {
			wrote = true
			for st, d := range w.delta {
				total[st] += d
			}
			continue
		}
		if !shared {
			continue
		}
		// A unit that refused its change (ErrConflict, say) before writing
		// leaves the transaction as it was. Any other failure may have
		// written, or may have ended the transaction itself (SQLite does
		// on a full disk or an I/O error), so the others run again in a
		// new one.
		if refusal(results[i]) {
			if after, err := w.changes(); err == nil && after == before {
				continue
			}
		}
		_, _ = w.exec("ROLLBACK")
		failed[i] = true
		return false, true, nil
	}
	if wrote {
		err = w.applyCounts(total)
	}
	return wrote, false, err
}

// refusal reports whether err is a Store's answer rather than a failure.
func refusal(err error) bool {
	for _, e := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, store.ErrLeaseLost} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func count(b []bool) (n int) {
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// changes counts the rows this connection has changed so far, so that a
// unit's failure can be told from a failure after writing.
func (w *wtx) changes() (n int64, err error) {
	if err := w.queryRow("SELECT total_changes()").Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count changes: %w", err)
	}
	return n, nil
}

// answer tells every op its unit's result, or err when the whole
// transaction failed.
func answer(owners [][]*writeOp, results []error, err error) {
	for i, ops := range owners {
		r := results[i]
		if r == nil {
			r = err
		}
		for _, op := range ops {
			op.done <- r
		}
	}
}

// move counts a task of tenant leaving status from (none for a new task)
// for status to (none for a deleted one).
func (w *wtx) move(tenant string, from, to store.Status) {
	if from != "" {
		w.delta[countKey{tenant, from}]--
	}
	if to != "" {
		w.delta[countKey{tenant, to}]++
	}
}

// applyCounts writes the count changes of a transaction: the totals of
// task_counts, and each tenant's of tenant_counts, whose row of a status
// is made the first time one of its tasks enters it.
func (w *wtx) applyCounts(total map[countKey]int64) error {
	byStatus := map[store.Status]int64{}
	for k, d := range total {
		if d == 0 {
			continue
		}
		byStatus[k.status] += d
		if _, err := w.exec(`INSERT INTO tenant_counts (tenant, status, n) VALUES (?1, ?2, ?3)
			ON CONFLICT (tenant, status) DO UPDATE SET n = n + ?3`, k.tenant, string(k.status), d); err != nil {
			return fmt.Errorf("sqlite: tenant counts: %w", err)
		}
	}
	for st, d := range byStatus {
		if d == 0 {
			continue
		}
		if _, err := w.exec("UPDATE task_counts SET n = n + ? WHERE status = ?", d, string(st)); err != nil {
			return fmt.Errorf("sqlite: task counts: %w", err)
		}
	}
	return nil
}

// stmt returns query prepared on the write connection, preparing it once.
func (w *wtx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(bg, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

// The writer's statements run without the caller's context: once an
// operation has started it finishes, and a context with a Done channel
// would cost the driver a goroutine per statement.
var bg = context.Background()

func (w *wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.Exec(args...)
}

func (w *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.Query(args...)
}

func (w *wtx) close() error {
	var errs []error
	for _, st := range w.stmts {
		errs = append(errs, st.Close())
	}
	for _, st := range w.bulkStmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, w.conn.Close())...)
}
