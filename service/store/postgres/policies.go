package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// PolicyPut registers a policy; see store.Store.
func (s *Store) PolicyPut(ctx context.Context, in *store.Policy) (*store.Policy, bool, error) {
	if s.closed.Load() {
		return nil, false, store.ErrClosed
	}
	p, err := prep.Policy(in)
	if err == nil && !textOK(p.Tenant, p.ID) {
		err = fmt.Errorf("malformed tenant or id: %w", store.ErrInvalid)
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: put policy: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO retry_policies (tenant, id, created_at, spec) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, p.Tenant, p.ID, p.CreatedAt, p.Spec)
	if err != nil {
		return nil, false, s.fail("put policy", err)
	}
	if tag.RowsAffected() == 1 {
		return p, true, nil
	}
	// The conflicting row is committed: ON CONFLICT waited for it.
	stored, err := s.PolicyGet(ctx, p.Tenant, p.ID)
	if err != nil {
		return nil, false, err
	}
	if !bytes.Equal(stored.Spec, p.Spec) {
		return nil, false, fmt.Errorf("postgres: policy %s is registered with another spec: %w", p.ID, store.ErrConflict)
	}
	return stored, false, nil
}

// PolicyGet returns one policy of tenant.
func (s *Store) PolicyGet(ctx context.Context, tenant, id string) (*store.Policy, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if !textOK(tenant, id) {
		return nil, fmt.Errorf("postgres: policy %q: %w", id, store.ErrNotFound)
	}
	p := &store.Policy{Tenant: tenant, ID: id}
	var at pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `SELECT spec, created_at FROM retry_policies WHERE tenant = $1 AND id = $2`,
		tenant, id).Scan(&p.Spec, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: policy %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail("get policy", err)
	}
	if p.Spec == nil {
		p.Spec = []byte{}
	}
	p.CreatedAt = fromTS(at)
	return p, nil
}

// PolicyList lists tenant's policies by ID; the page token is the last ID.
func (s *Store) PolicyList(ctx context.Context, tenant string, page store.Page) ([]*store.Policy, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	after := ""
	if page.Token != "" {
		var err error
		if after, err = pagetoken.Decode("policy", page.Token); err != nil {
			return nil, "", fmt.Errorf("postgres: list policies: %w", err)
		}
		if !textOK(after) {
			return nil, "", fmt.Errorf("postgres: list policies: page token: %w", store.ErrInvalid)
		}
	}
	if !textOK(tenant) {
		return nil, "", nil
	}
	limit := store.PageLimit(page.Limit)
	rows, err := s.pool.Query(ctx, `SELECT id, spec, created_at FROM retry_policies
		WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3`, tenant, after, limit+1)
	if err != nil {
		return nil, "", s.fail("list policies", err)
	}
	defer rows.Close()
	var items []*store.Policy
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.Encode("policy", items[len(items)-1].ID), nil
		}
		p := &store.Policy{Tenant: tenant}
		var at pgtype.Timestamptz
		if err := rows.Scan(&p.ID, &p.Spec, &at); err != nil {
			return nil, "", s.fail("list policies", err)
		}
		if p.Spec == nil {
			p.Spec = []byte{}
		}
		p.CreatedAt = fromTS(at)
		items = append(items, p)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail("list policies", err)
	}
	return items, "", nil
}
