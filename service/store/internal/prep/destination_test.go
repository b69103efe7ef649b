package prep_test

import (
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/prep"
)

func TestDestination(t *testing.T) {
	in := &store.Destination{Tenant: "t", ID: "d", Spec: []byte("{}"), RequestHash: "h", Version: 7,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
	d, err := prep.Destination(in)
	ms := t0.Truncate(time.Millisecond)
	if err != nil || d == in || d.Version != 1 || d.RequestHash != "h" || !d.CreatedAt.Equal(ms) ||
		!d.UpdatedAt.Equal(ms) || d.CreatedAt.Location() != time.UTC {
		t.Errorf("Destination(%+v) = %+v, %v; want a copy at version 1, created and updated at the ms in UTC", in, d, err)
	}
	if &d.Spec[0] == &in.Spec[0] {
		t.Error("Destination shares the spec's bytes")
	}
	before := time.Now().Add(-time.Millisecond)
	if d, _ := prep.Destination(&store.Destination{Tenant: "t", ID: "d"}); d.Spec == nil || d.CreatedAt.Before(before) {
		t.Errorf("Destination of a zero time and no spec = %+v, want an empty spec, created now", d)
	}
}

func TestDestinationChange(t *testing.T) {
	in := &store.Destination{Tenant: "t", ID: "d", Version: 3, CreatedAt: t0, UpdatedAt: t0}
	d, err := prep.DestinationChange(in)
	if err != nil || d.Version != 3 || !d.CreatedAt.IsZero() || d.Spec == nil ||
		!d.UpdatedAt.Equal(t0.Truncate(time.Millisecond)) || d.UpdatedAt.Location() != time.UTC {
		t.Errorf("DestinationChange(%+v) = %+v, %v; want version 3, no CreatedAt, updated at the ms in UTC", in, d, err)
	}
	before := time.Now().Add(-time.Millisecond)
	if d, _ := prep.DestinationChange(&store.Destination{Tenant: "t", ID: "d"}); d.UpdatedAt.Before(before) {
		t.Errorf("UpdatedAt of a zero time = %v, want now", d.UpdatedAt)
	}
}

func TestDestinationKey(t *testing.T) {
	for _, in := range []*store.Destination{{Tenant: "t"}, {ID: "d"}, {}} {
		if _, err := prep.Destination(in); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Destination(%+v) = %v, want ErrInvalid", in, err)
		}
		if _, err := prep.DestinationChange(in); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("DestinationChange(%+v) = %v, want ErrInvalid", in, err)
		}
	}
	if err := prep.DestinationKey("t", "d"); err != nil {
		t.Errorf("DestinationKey(t, d) = %v", err)
	}
}
