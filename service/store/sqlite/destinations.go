package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// Destinations are rows of their own table (migrations/005). Their writes
// go through the writer, as every write does, so that each reads the row
// and changes it with nothing else in between: the version checks need no
// more than that.

// destCols are the columns scanDestination reads, in its order.
const destCols = `id, spec, request_hash, version, created_at, updated_at`

// destByID reads one destination of a tenant.
const destByID = `SELECT ` + destCols + ` FROM destinations WHERE tenant = ? AND id = ?`

// DestinationCreate stores a new destination; see store.Destinations.
func (s *Store) DestinationCreate(ctx context.Context, in *store.Destination) (*store.Destination, bool, error) {
	d, err := prep.Destination(in)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create destination: %w", err)
	}
	var stored *store.Destination
	created := false
	err = s.write(ctx, &writeOp{run: func(w *wtx) error {
		stored, created = nil, false // the writer may run this again (see runBatch)
		cur, err := scanDestination(w.queryRow(destByID, d.Tenant, d.ID), d.Tenant)
		switch {
		case err == nil && cur.RequestHash != d.RequestHash:
			return fmt.Errorf("destination %s was created by another request: %w", d.ID, store.ErrConflict)
		case err == nil:
			stored = cur
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := w.exec(`INSERT INTO destinations (tenant, id, spec, request_hash, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, d.Tenant, d.ID, d.Spec, d.RequestHash, d.Version,
			epochms.Of(d.CreatedAt), epochms.Of(d.UpdatedAt)); err != nil {
			return err
		}
		stored, created = d, true
		return nil
	}})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: create destination: %w", err)
	}
	return stored, created, nil
}

// DestinationUpdate changes a destination at the version given; see
// store.Destinations.
func (s *Store) DestinationUpdate(ctx context.Context, in *store.Destination) (*store.Destination, error) {
	d, err := prep.DestinationChange(in)
	if err != nil {
		return nil, fmt.Errorf("sqlite: update destination: %w", err)
	}
	var out *store.Destination
	err = s.write(ctx, &writeOp{run: func(w *wtx) error {
		out = nil // the writer may run this again (see runBatch)
		cur, err := scanDestination(w.queryRow(destByID, d.Tenant, d.ID), d.Tenant)
		if err != nil {
			return destMissing(d.ID, err)
		}
		if cur.Version != d.Version {
			return fmt.Errorf("destination %s is at version %d, not %d: %w", d.ID, cur.Version, d.Version, store.ErrConflict)
		}
		if _, err := w.exec(`UPDATE destinations SET spec = ?, request_hash = ?, version = ?, updated_at = ?
			WHERE tenant = ? AND id = ?`, d.Spec, d.RequestHash, cur.Version+1, epochms.Of(d.UpdatedAt),
			d.Tenant, d.ID); err != nil {
			return err
		}
		out = &store.Destination{Tenant: d.Tenant, ID: d.ID, Spec: d.Spec, RequestHash: d.RequestHash,
			Version: cur.Version + 1, CreatedAt: cur.CreatedAt, UpdatedAt: d.UpdatedAt}
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("sqlite: update destination: %w", err)
	}
	return out, nil
}

// DestinationGet returns one destination of tenant.
func (s *Store) DestinationGet(ctx context.Context, tenant, id string) (*store.Destination, error) {
	if err := prep.DestinationKey(tenant, id); err != nil {
		return nil, fmt.Errorf("sqlite: get destination: %w", err)
	}
	st, err := s.read(ctx, destByID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get destination: %w", err)
	}
	d, err := scanDestination(st.QueryRowContext(ctx, tenant, id), tenant)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get destination: %w", destMissing(id, err))
	}
	return d, nil
}

// DestinationList lists tenant's destinations by ID; the page token is the
// last ID.
func (s *Store) DestinationList(ctx context.Context, tenant string, page store.Page) ([]*store.Destination, string, error) {
	if tenant == "" {
		return nil, "", fmt.Errorf("sqlite: list destinations: empty tenant: %w", store.ErrInvalid)
	}
	after := ""
	if page.Token != "" {
		var err error
		if after, err = pagetoken.Decode("destination", page.Token); err != nil {
			return nil, "", fmt.Errorf("sqlite: list destinations: %w", err)
		}
	}
	st, err := s.read(ctx, `SELECT `+destCols+` FROM destinations WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?`)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list destinations: %w", err)
	}
	limit := store.PageLimit(page.Limit)
	rows, err := st.QueryContext(ctx, tenant, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list destinations: %w", err)
	}
	defer rows.Close()
	var items []*store.Destination
	for rows.Next() {
		if len(items) == limit {
			return items, pagetoken.Encode("destination", items[len(items)-1].ID), rows.Close()
		}
		d, err := scanDestination(rows, tenant)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list destinations: %w", err)
		}
		items = append(items, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list destinations: %w", err)
	}
	return items, "", nil
}

// DestinationDelete deletes a destination at the version given (0: any);
// see store.Destinations.
func (s *Store) DestinationDelete(ctx context.Context, tenant, id string, version int64) error {
	if err := prep.DestinationKey(tenant, id); err != nil {
		return fmt.Errorf("sqlite: delete destination: %w", err)
	}
	err := s.write(ctx, &writeOp{run: func(w *wtx) error {
		var cur int64
		if err := w.queryRow(`SELECT version FROM destinations WHERE tenant = ? AND id = ?`, tenant, id).Scan(&cur); err != nil {
			return destMissing(id, err)
		}
		if version != 0 && cur != version {
			return fmt.Errorf("destination %s is at version %d, not %d: %w", id, cur, version, store.ErrConflict)
		}
		_, err := w.exec(`DELETE FROM destinations WHERE tenant = ? AND id = ?`, tenant, id)
		return err
	}})
	if err != nil {
		return fmt.Errorf("sqlite: delete destination: %w", err)
	}
	return nil
}

// scanDestination reads a row of destCols of tenant's.
func scanDestination(row interface{ Scan(...any) error }, tenant string) (*store.Destination, error) {
	d := &store.Destination{Tenant: tenant}
	var created, updated int64
	if err := row.Scan(&d.ID, &d.Spec, &d.RequestHash, &d.Version, &created, &updated); err != nil {
		return nil, err
	}
	if d.Spec == nil {
		d.Spec = []byte{}
	}
	d.CreatedAt, d.UpdatedAt = epochms.Time(created), epochms.Time(updated)
	return d, nil
}

// destMissing turns the error of reading destination id into ErrNotFound
// when there was no row.
func destMissing(id string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("destination %s: %w", id, store.ErrNotFound)
	}
	return err
}

var _ store.Destinations = (*Store)(nil)
