package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/headerjson"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
	"github.com/retrykit/retry/service/store/internal/targethost"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// TaskCreate stores a new task or returns the one its idempotency key
// already names; see store.Store.
func (s *Store) TaskCreate(ctx context.Context, in *store.Task) (*store.Task, bool, error) {
	res, err := s.TaskCreateBatch(ctx, []*store.Task{in})
	if err != nil {
		return nil, false, err
	}
	return res[0].Task, res[0].Created, res[0].Err
}

// TaskCreateBatch stores several tasks in one transaction, so one commit;
// see store.Store. Concurrent calls share commits too (see write).
func (s *Store) TaskCreateBatch(ctx context.Context, in []*store.Task) ([]store.CreateResult, error) {
	ts := make([]store.Task, len(in))
	headers := make([]string, len(in))
	refused := make([]error, len(in)) // before the transaction
	for i, t := range in {
		ts[i] = *t
		err := ts[i].CreateDefaults()
		if err == nil {
			headers[i], err = headerjson.Encode(ts[i].Headers)
		}
		if err != nil {
			refused[i] = fmt.Errorf("sqlite: create task: %w", err)
		}
	}
	c := &createCall{ts: ts, headers: headers, refused: refused}
	if err := s.write(ctx, &writeOp{create: c}); err != nil {
		return nil, fmt.Errorf("sqlite: create task: %w", err)
	}
	return c.res, nil
}

// TaskGet returns one task of tenant.
func (s *Store) TaskGet(ctx context.Context, tenant, id string) (*store.Task, error) {
	st, err := s.read(ctx, taskSelect+` WHERE t.id = ? AND t.tenant = ?`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get task: %w", err)
	}
	t, _, err := scanTask(st.QueryRowContext(ctx, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: task %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get task: %w", err)
	}
	return t, nil
}

// TaskList lists tasks newest first; the page token is the creation
// sequence number of the last task on the page. Every filter is matched by
// the query, on an index when Tenant is set: tasks_idempotency finds the
// one task of an IdempotencyKey, tasks_tenant_host a TargetHost's.
func (s *Store) TaskList(ctx context.Context, f store.TaskFilter, page store.Page) ([]*store.Task, string, error) {
	if f.IdempotencyKey != "" && f.Tenant == "" {
		return nil, "", fmt.Errorf("sqlite: list tasks: an idempotency key without a tenant: %w", store.ErrInvalid)
	}
	var where []string
	var args []any
	if page.Token != "" {
		after, err := pagetoken.DecodeInt("task", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list tasks: %w", err)
		}
		where, args = append(where, "t.seq < ?"), append(args, after)
	}
	if f.Tenant != "" {
		where, args = append(where, "t.tenant = ?"), append(args, f.Tenant)
	}
	if f.PolicyID != "" {
		where, args = append(where, "t.policy_id = ?"), append(args, f.PolicyID)
	}
	if f.IdempotencyKey != "" {
		where, args = append(where, "t.idempotency_key = ?"), append(args, f.IdempotencyKey)
	}
	if f.TargetHost != "" {
		where, args = append(where, "t.target_host = ?"), append(args, targethost.Fold(f.TargetHost))
	}
	if len(f.Statuses) > 0 {
		states, statuses, err := statusLists(f.Statuses)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list tasks: %w", err)
		}
		where = append(where, "t.state IN ("+states+")", "t.status IN ("+statuses+")")
	}
	q := taskSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := store.PageLimit(page.Limit)
	q += " ORDER BY t.seq DESC LIMIT ?"
	st, err := s.read(ctx, q)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list tasks: %w", err)
	}
	rows, err := st.QueryContext(ctx, append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list tasks: %w", err)
	}
	defer rows.Close()
	var items []*store.Task
	var last int64
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.EncodeInt("task", last), rows.Close()
		}
		t, seq, err := scanTask(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list tasks: %w", err)
		}
		items, last = append(items, t), seq
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list tasks: %w", err)
	}
	return items, "", nil
}

// statusLists renders statuses, and the states they belong to, as SQL
// literals, sorted, so that the dead-letter list matches the tasks_dead
// partial index word for word. The statuses are checked against the known
// ones first: nothing else reaches the SQL text.
func statusLists(statuses []store.Status) (states, exact string, err error) {
	var st, ex []string
	for _, s := range statuses {
		if !taskstate.Known(s) {
			return "", "", fmt.Errorf("status %q: %w", s, store.ErrInvalid)
		}
		st, ex = append(st, "'"+taskstate.Of(s)+"'"), append(ex, "'"+string(s)+"'")
	}
	slices.Sort(st)
	slices.Sort(ex)
	return strings.Join(slices.Compact(st), ", "), strings.Join(slices.Compact(ex), ", "), nil
}

// TaskTransition cancels or redrives a task; see store.Store.
func (s *Store) TaskTransition(ctx context.Context, tr store.Transition) (*store.Task, error) {
	now, err := prep.Transition(&tr)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	set := `state = 'CANCELLED', status = 'CANCELLED', finished_at = ?1, updated_at = ?1, version = version + 1`
	if tr.To == store.Pending {
		set = `state = 'LIVE', status = 'PENDING', wake_at = ?1, attempt_number = 0, prev_delay_ns = 0, last_error = '', last_status = 0,
			next_attempt_at = ?1, budget_start = ?1, finished_at = 0, lease_until = 0, updated_at = ?1,
			version = version + 1`
	}
	var out *store.Task
	err = s.write(ctx, &writeOp{run: func(w *wtx) error {
		var seq int64
		var from store.Status
		err := w.queryRow(`SELECT seq, status FROM tasks WHERE id = ? AND tenant = ?`, tr.TaskID, tr.Tenant).Scan(&seq, &from)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("task %s: %w", tr.TaskID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if !slices.Contains(tr.From, from) {
			return fmt.Errorf("task %s is %s: %w", tr.TaskID, from, store.ErrConflict)
		}
		if _, err := w.exec(`UPDATE tasks SET `+set+` WHERE seq = ?2`, epochms.Of(now), seq); err != nil {
			return err
		}
		w.move(tr.Tenant, from, tr.To)
		out, err = w.taskBySeq(seq)
		return err
	}})
	if err != nil {
		return nil, fmt.Errorf("sqlite: transition: %w", err)
	}
	return out, nil
}

func (w *wtx) queryRow(query string, args ...any) *sql.Row {
	st, err := w.stmt(query)
	if err != nil {
		// Unprepared, the query fails the same way, and Row.Scan reports it.
		return w.conn.QueryRowContext(context.Background(), query, args...)
	}
	return st.QueryRow(args...)
}

// taskBySeq reads a whole task inside the write transaction.
func (w *wtx) taskBySeq(seq int64) (*store.Task, error) {
	t, _, err := scanTask(w.queryRow(taskSelect+` WHERE t.seq = ?`, seq))
	return t, err
}
