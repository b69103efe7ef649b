package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// Destinations are rows of retry_destinations (migrations/006). A change or
// a delete names the version it was made from in its WHERE clause, so of
// two writers from one version only the first to commit changes the row:
// the other's statement, which waited for its lock, finds the version
// moved on and matches nothing.

// destCols are the columns scanDestination reads, in its order.
const destCols = `id, spec, request_hash, version, created_at, updated_at`

// DestinationCreate stores a new destination; see store.Destinations.
func (s *Store) DestinationCreate(ctx context.Context, in *store.Destination) (*store.Destination, bool, error) {
	if s.closed.Load() {
		return nil, false, store.ErrClosed
	}
	d, err := prep.Destination(in)
	if err == nil && !textOK(d.Tenant, d.ID, d.RequestHash) {
		err = fmt.Errorf("malformed tenant, id or request hash: %w", store.ErrInvalid)
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: create destination: %w", err)
	}
	// Each pass inserts the row or reads the one there. Another pass is
	// needed only when that row was deleted between the two statements.
	for {
		tag, err := s.pool.Exec(ctx, `INSERT INTO retry_destinations (tenant, id, version, created_at, updated_at,
			request_hash, spec) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
			d.Tenant, d.ID, d.Version, d.CreatedAt, d.UpdatedAt, d.RequestHash, d.Spec)
		if err != nil {
			return nil, false, s.fail("create destination", err)
		}
		if tag.RowsAffected() == 1 {
			return d, true, nil
		}
		// The conflicting row is committed: ON CONFLICT waited for it.
		stored, err := s.DestinationGet(ctx, d.Tenant, d.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, false, err
		case stored.RequestHash != d.RequestHash:
			return nil, false, fmt.Errorf("postgres: destination %s was created by another request: %w", d.ID, store.ErrConflict)
		}
		return stored, false, nil
	}
}

// DestinationUpdate changes a destination at the version given; see
// store.Destinations.
func (s *Store) DestinationUpdate(ctx context.Context, in *store.Destination) (*store.Destination, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	d, err := prep.DestinationChange(in)
	if err == nil && !textOK(d.RequestHash) {
		err = fmt.Errorf("malformed request hash: %w", store.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: update destination: %w", err)
	}
	if !textOK(d.Tenant, d.ID) {
		return nil, fmt.Errorf("postgres: destination %q: %w", d.ID, store.ErrNotFound)
	}
	var at pgtype.Timestamptz
	err = s.pool.QueryRow(ctx, `UPDATE retry_destinations SET spec = $4, request_hash = $5, version = version + 1,
		updated_at = $6 WHERE tenant = $1 AND id = $2 AND version = $3 RETURNING created_at`,
		d.Tenant, d.ID, d.Version, d.Spec, d.RequestHash, d.UpdatedAt).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.destRefused(ctx, "update destination", d.Tenant, d.ID, d.Version)
	}
	if err != nil {
		return nil, s.fail("update destination", err)
	}
	d.Version++
	d.CreatedAt = fromTS(at)
	return d, nil
}

// DestinationGet returns one destination of tenant.
func (s *Store) DestinationGet(ctx context.Context, tenant, id string) (*store.Destination, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := prep.DestinationKey(tenant, id); err != nil {
		return nil, fmt.Errorf("postgres: get destination: %w", err)
	}
	if !textOK(tenant, id) {
		return nil, fmt.Errorf("postgres: destination %q: %w", id, store.ErrNotFound)
	}
	d, err := scanDestination(s.pool.QueryRow(ctx, `SELECT `+destCols+` FROM retry_destinations
		WHERE tenant = $1 AND id = $2`, tenant, id), tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: destination %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail("get destination", err)
	}
	return d, nil
}

// DestinationList lists tenant's destinations by ID; the page token is the
// last ID.
func (s *Store) DestinationList(ctx context.Context, tenant string, page store.Page) ([]*store.Destination, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	if tenant == "" {
		return nil, "", fmt.Errorf("postgres: list destinations: empty tenant: %w", store.ErrInvalid)
	}
	after := ""
	if page.Token != "" {
		var err error
		if after, err = pagetoken.Decode("destination", page.Token); err != nil {
			return nil, "", fmt.Errorf("postgres: list destinations: %w", err)
		}
		if !textOK(after) {
			return nil, "", fmt.Errorf("postgres: list destinations: page token: %w", store.ErrInvalid)
		}
	}
	if !textOK(tenant) {
		return nil, "", nil
	}
	limit := store.PageLimit(page.Limit)
	rows, err := s.pool.Query(ctx, `SELECT `+destCols+` FROM retry_destinations
		WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3`, tenant, after, limit+1)
	if err != nil {
		return nil, "", s.fail("list destinations", err)
	}
	defer rows.Close()
	var items []*store.Destination
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.Encode("destination", items[len(items)-1].ID), nil
		}
		d, err := scanDestination(rows, tenant)
		if err != nil {
			return nil, "", s.fail("list destinations", err)
		}
		items = append(items, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail("list destinations", err)
	}
	return items, "", nil
}

// DestinationDelete deletes a destination at the version given (0: any);
// see store.Destinations.
func (s *Store) DestinationDelete(ctx context.Context, tenant, id string, version int64) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := prep.DestinationKey(tenant, id); err != nil {
		return fmt.Errorf("postgres: delete destination: %w", err)
	}
	if !textOK(tenant, id) {
		return fmt.Errorf("postgres: destination %q: %w", id, store.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM retry_destinations
		WHERE tenant = $1 AND id = $2 AND ($3::bigint = 0 OR version = $3::bigint)`, tenant, id, version)
	if err != nil {
		return s.fail("delete destination", err)
	}
	if tag.RowsAffected() == 0 {
		return s.destRefused(ctx, "delete destination", tenant, id, version)
	}
	return nil
}

// destRefused says why a change of destination (tenant, id) made from
// version matched no row: there is no such destination, or it is at
// another version.
func (s *Store) destRefused(ctx context.Context, op, tenant, id string, version int64) error {
	var cur int64
	err := s.pool.QueryRow(ctx, `SELECT version FROM retry_destinations WHERE tenant = $1 AND id = $2`,
		tenant, id).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: %s: destination %s: %w", op, id, store.ErrNotFound)
	}
	if err != nil {
		return s.fail(op, err)
	}
	return fmt.Errorf("postgres: %s: destination %s is at version %d, not %d: %w", op, id, cur, version, store.ErrConflict)
}

// scanDestination reads a row of destCols of tenant's.
func scanDestination(row pgx.Row, tenant string) (*store.Destination, error) {
	d := &store.Destination{Tenant: tenant}
	var created, updated pgtype.Timestamptz
	if err := row.Scan(&d.ID, &d.Spec, &d.RequestHash, &d.Version, &created, &updated); err != nil {
		return nil, err
	}
	if d.Spec == nil {
		d.Spec = []byte{}
	}
	d.CreatedAt, d.UpdatedAt = fromTS(created), fromTS(updated)
	return d, nil
}

var _ store.Destinations = (*Store)(nil)
