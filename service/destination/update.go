package destination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
)

// updateTries bounds how often Update reads again after a concurrent change.
const updateTries = 5

// Update reads destination (tenant, id), lets change edit it (its secrets
// stay sealed), and writes it back at the version it read, reading again
// when another writer came first. change reports whether it changed
// anything: nothing is written when it did not. Update returns the
// destination as stored last. A version other than 0 makes the change
// conditional: store.ErrConflict, at once, unless the destination is at
// that version.
func Update(ctx context.Context, st store.Destinations, tenant, id string, now time.Time,
	change func(d *Destination) (bool, error), version int64) (*Destination, *store.Destination, error) {
	for range updateTries {
		sd, err := st.DestinationGet(ctx, tenant, id)
		if err != nil {
			return nil, nil, err
		}
		if version != 0 && sd.Version != version {
			return nil, nil, fmt.Errorf("destination %s is at version %d, not %d: %w", id, sd.Version, version, store.ErrConflict)
		}
		d, err := Decode(sd.Spec)
		if err != nil {
			return nil, nil, err
		}
		changed, err := change(d)
		if err != nil || !changed {
			return d, sd, err
		}
		spec, err := d.Encode()
		if err != nil {
			return nil, nil, err
		}
		next := *sd
		next.Spec, next.UpdatedAt = spec, now
		stored, err := st.DestinationUpdate(ctx, &next)
		if errors.Is(err, store.ErrConflict) && version == 0 {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return d, stored, nil
	}
	return nil, nil, fmt.Errorf("destination %s: changed by others %d times in a row: %w", id, updateTries, store.ErrConflict)
}

// SetStatus moves d to status with reason at now, reporting whether it
// changed.
func (d *Destination) SetStatus(status Status, reason string, now time.Time) bool {
	if d.Status == status && d.StatusReason == reason {
		return false
	}
	if d.Status != status {
		d.StatusSince = now.UnixMilli()
	}
	d.Status, d.StatusReason = status, reason
	if status == Active {
		d.FailingSince = 0 // a resume starts the count of failures anew
	}
	return true
}

// RotateSigning makes secret (in the clear) d's signing secret, keeps the
// one it replaces signing beside it until now+overlap, and drops the
// rotated-out secrets whose overlap has ended. d's secrets are sealed
// again with k, every one: a secret moved from one field to another is
// sealed for its new place.
func (d *Destination) RotateSigning(k Sealer, tenant, secret string, now time.Time, overlap time.Duration) error {
	if err := d.Open(k, tenant); err != nil {
		return err
	}
	var keep []SigningPrevious
	for _, p := range d.Signing.Previous {
		if p.Until > now.UnixMilli() {
			keep = append(keep, p)
		}
	}
	if overlap > 0 {
		keep = append(keep, SigningPrevious{Secret: d.Signing.Secret, Until: now.Add(overlap).UnixMilli()})
	}
	d.Signing.Secret, d.Signing.Previous = NewSecret(secret), keep
	return d.Seal(k, tenant)
}
