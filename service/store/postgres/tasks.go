package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/targethost"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

// TaskCreate stores a new task or returns the one its idempotency key
// already names; see store.Store. It is an item of a TaskCreateBatch that
// it shares with the creates under way at the same time (see
// Store.creates), so that they share one statement and one commit.
func (s *Store) TaskCreate(ctx context.Context, in *store.Task) (*store.Task, bool, error) {
	if s.closed.Load() {
		return nil, false, store.ErrClosed
	}
	r, err := s.creates.Do(ctx, in)
	if err != nil && ctx.Err() != nil {
		return nil, false, fmt.Errorf("postgres: create task: %w", err)
	}
	if err != nil {
		return nil, false, err // the batch's, which says what it was
	}
	return r.Task, r.Created, r.Err
}

// TaskGet returns one task of tenant.
func (s *Store) TaskGet(ctx context.Context, tenant, id string) (*store.Task, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if !textOK(tenant, id) {
		return nil, fmt.Errorf("postgres: task %q: %w", id, store.ErrNotFound)
	}
	// The tenant is no index's condition (see poolConfig): with none to
	// tell them apart, the planner took an index on tenant over the ID's.
	t, _, err := scanTask(s.pool.QueryRow(ctx, taskSelect+` WHERE t.id = $1 AND (t.tenant = $2) IS TRUE`, id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: task %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail("get task", err)
	}
	return t, nil
}

// TaskList lists tasks newest first; the page token is the creation
// sequence number of the last task on the page. Tasks whose creation
// commits out of the order of their sequence numbers (concurrent creates)
// may be missed by a paging that is under way, as any task created after
// the first page was read may be. Every filter is matched by the query, on
// an index when Tenant is set: retry_tasks_idempotency finds the one task
// of an IdempotencyKey, retry_tasks_tenant_host a TargetHost's.
func (s *Store) TaskList(ctx context.Context, f store.TaskFilter, page store.Page) ([]*store.Task, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	if f.IdempotencyKey != "" && f.Tenant == "" {
		return nil, "", fmt.Errorf("postgres: list tasks: an idempotency key without a tenant: %w", store.ErrInvalid)
	}
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if page.Token != "" {
		after, err := pagetoken.DecodeInt("task", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("postgres: list tasks: %w", err)
		}
		arg("t.seq < $%d", after)
	}
	if len(f.Statuses) > 0 {
		states, exact, err := statusLists(f.Statuses)
		if err != nil {
			return nil, "", fmt.Errorf("postgres: list tasks: %w", err)
		}
		where = append(where, "t.state IN ("+states+")")
		if exact != "" {
			where = append(where, "r.status IN ("+exact+")")
		}
	}
	if !textOK(f.Tenant, f.PolicyID, f.IdempotencyKey, f.TargetHost) {
		return nil, "", nil // no task has such a name
	}
	if f.Tenant != "" {
		arg("t.tenant = $%d", f.Tenant)
	}
	if f.PolicyID != "" {
		arg("t.policy_id = $%d", f.PolicyID)
	}
	if f.IdempotencyKey != "" {
		arg("t.idempotency_key = $%d", f.IdempotencyKey)
	}
	if f.TargetHost != "" {
		arg("t.target_host = $%d", targethost.Fold(f.TargetHost))
	}
	q := taskListSelect
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := store.PageLimit(page.Limit)
	args = append(args, limit+1)
	q += fmt.Sprintf(" ORDER BY t.seq DESC LIMIT $%d", len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", s.fail("list tasks", err)
	}
	defer rows.Close()
	var items []*store.Task
	var last int64
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.EncodeInt("task", last), nil
		}
		t, seq, err := scanTask(rows)
		if err != nil {
			return nil, "", s.fail("list tasks", err)
		}
		items, last = append(items, t), seq
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail("list tasks", err)
	}
	return items, "", nil
}

// statusLists renders statuses as SQL literals: the states they belong to,
// sorted, so that the dead-letter list matches the partial index
// retry_tasks_dead word for word, and, when the statuses hold one of
// PENDING and IN_FLIGHT but not the other, the statuses themselves, which
// the state (LIVE for both) cannot tell apart; exact is empty otherwise.
// The statuses are checked against the known ones first: nothing else
// reaches the SQL text.
func statusLists(statuses []store.Status) (states, exact string, err error) {
	var st, ex []string
	live := map[store.Status]bool{}
	for _, s := range statuses {
		if !taskstate.Known(s) {
			return "", "", fmt.Errorf("status %q: %w", s, store.ErrInvalid)
		}
		st, ex = append(st, "'"+taskstate.Of(s)+"'"), append(ex, "'"+string(s)+"'")
		if !s.Terminal() {
			live[s] = true
		}
	}
	slices.Sort(st)
	states = strings.Join(slices.Compact(st), ", ")
	if len(live) != 1 {
		return states, "", nil
	}
	slices.Sort(ex)
	return states, strings.Join(slices.Compact(ex), ", "), nil
}
