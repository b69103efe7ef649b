package prep

import (
	"bytes"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/store"
)

// DestinationKey refuses, with ErrInvalid, an empty tenant or ID: every
// method of store.Destinations names one destination of one tenant.
func DestinationKey(tenant, id string) error {
	if tenant == "" || id == "" {
		return fmt.Errorf("empty tenant or id: %w", store.ErrInvalid)
	}
	return nil
}

// Destination returns the destination DestinationCreate stores for in: a
// copy at Version 1, its Spec never nil, its CreatedAt the current time
// when zero, cut to the millisecond, in UTC, and its UpdatedAt the same.
// A destination without a tenant or an ID is ErrInvalid.
func Destination(in *store.Destination) (*store.Destination, error) {
	if err := DestinationKey(in.Tenant, in.ID); err != nil {
		return nil, err
	}
	at := millis(in.CreatedAt)
	return &store.Destination{Tenant: in.Tenant, ID: in.ID, Spec: spec(in.Spec), RequestHash: in.RequestHash,
		Version: 1, CreatedAt: at, UpdatedAt: at}, nil
}

// DestinationChange returns what DestinationUpdate writes for in: a copy,
// its Spec never nil, its UpdatedAt the current time when zero, cut to the
// millisecond, in UTC. Version is still the one the change is made from,
// and CreatedAt is left for the store to fill in from what it holds.
func DestinationChange(in *store.Destination) (*store.Destination, error) {
	if err := DestinationKey(in.Tenant, in.ID); err != nil {
		return nil, err
	}
	return &store.Destination{Tenant: in.Tenant, ID: in.ID, Spec: spec(in.Spec), RequestHash: in.RequestHash,
		Version: in.Version, UpdatedAt: millis(in.UpdatedAt)}, nil
}

// spec copies b, so that the caller may change its own afterwards; an
// absent spec is stored, and read back, as an empty one.
func spec(b []byte) []byte {
	if b = bytes.Clone(b); b == nil {
		b = []byte{}
	}
	return b
}

// millis returns t, or the current time when zero, cut to the millisecond
// the stores keep, in UTC.
func millis(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
