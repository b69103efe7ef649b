package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// PolicyPut registers a policy; see store.Store.
func (s *Store) PolicyPut(ctx context.Context, in *store.Policy) (*store.Policy, bool, error) {
	p, err := prep.Policy(in)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: put policy: %w", err)
	}
	created := false
	err = s.write(ctx, &writeOp{run: func(w *wtx) error {
		created = false // the writer may run this again (see runBatch)
		var spec []byte
		var at int64
		err := w.queryRow(`SELECT spec, created_at FROM policies WHERE tenant = ? AND id = ?`, p.Tenant, p.ID).Scan(&spec, &at)
		switch {
		case err == nil && !bytes.Equal(spec, p.Spec):
			return fmt.Errorf("policy %s is registered with another spec: %w", p.ID, store.ErrConflict)
		case err == nil:
			p.CreatedAt = epochms.Time(at)
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		created = true
		_, err = w.exec(`INSERT INTO policies (tenant, id, spec, created_at) VALUES (?, ?, ?, ?)`,
			p.Tenant, p.ID, p.Spec, epochms.Of(p.CreatedAt))
		return err
	}})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: put policy: %w", err)
	}
	return p, created, nil
}

// PolicyGet returns one policy of tenant.
func (s *Store) PolicyGet(ctx context.Context, tenant, id string) (*store.Policy, error) {
	st, err := s.read(ctx, `SELECT spec, created_at FROM policies WHERE tenant = ? AND id = ?`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get policy: %w", err)
	}
	p := &store.Policy{Tenant: tenant, ID: id}
	var at int64
	err = st.QueryRowContext(ctx, tenant, id).Scan(&p.Spec, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: policy %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get policy: %w", err)
	}
	p.CreatedAt = epochms.Time(at)
	return p, nil
}

// PolicyList lists tenant's policies by ID; the page token is the last ID.
func (s *Store) PolicyList(ctx context.Context, tenant string, page store.Page) ([]*store.Policy, string, error) {
	after := ""
	if page.Token != "" {
		var err error
		if after, err = pagetoken.Decode("policy", page.Token); err != nil {
			return nil, "", fmt.Errorf("sqlite: list policies: %w", err)
		}
	}
	st, err := s.read(ctx, `SELECT id, spec, created_at FROM policies WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?`)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list policies: %w", err)
	}
	limit := store.PageLimit(page.Limit)
	rows, err := st.QueryContext(ctx, tenant, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list policies: %w", err)
	}
	defer rows.Close()
	var items []*store.Policy
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.Encode("policy", items[len(items)-1].ID), rows.Close()
		}
		p := &store.Policy{Tenant: tenant}
		var at int64
		if err := rows.Scan(&p.ID, &p.Spec, &at); err != nil {
			return nil, "", fmt.Errorf("sqlite: list policies: %w", err)
		}
		p.CreatedAt = epochms.Time(at)
		items = append(items, p)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list policies: %w", err)
	}
	return items, "", nil
}
