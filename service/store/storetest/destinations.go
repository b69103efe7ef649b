package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// The tests of store.Destinations, which every store implements: each
// fails, rather than skips, a store that does not. Updates, deletes and
// lists are in destchanges.go.

// destStore returns a new store as store.Destinations, failing t when it
// is not one.
func destStore(t *testing.T, newStore NewStore) (store.Store, store.Destinations) {
	t.Helper()
	s := setup(t, newStore)
	d, ok := s.(store.Destinations)
	if !ok {
		t.Fatalf("%T does not implement store.Destinations", s)
	}
	return s, d
}

// newDest returns a request to create destination id of tn. Its spec
// follows hash, as a sealed secret would differ on every request.
func newDest(tn, id, hash string) *store.Destination {
	return &store.Destination{Tenant: tn, ID: id, RequestHash: hash, CreatedAt: t0.Add(456789),
		Spec: []byte(`{"url":"https://hooks.example/` + id + `","secret":"sealed:` + hash + `"}`)}
}

func createDest(t *testing.T, s store.Destinations, in *store.Destination) *store.Destination {
	t.Helper()
	got, created, err := s.DestinationCreate(context.Background(), in)
	if err != nil || !created {
		t.Fatalf("DestinationCreate(%s, %s) = created %v, %v; want created", in.Tenant, in.ID, created, err)
	}
	return got
}

func getDest(t *testing.T, s store.Destinations, tn, id string) *store.Destination {
	t.Helper()
	got, err := s.DestinationGet(context.Background(), tn, id)
	if err != nil {
		t.Fatalf("DestinationGet(%s, %s) = %v", tn, id, err)
	}
	return got
}

// checkDest fails t unless got is want, its times at the millisecond in
// UTC.
func checkDest(t *testing.T, what string, got, want *store.Destination) {
	t.Helper()
	if got.Tenant != want.Tenant || got.ID != want.ID || got.RequestHash != want.RequestHash || got.Version != want.Version {
		t.Errorf("%s = %s/%s hash %q version %d, want %s/%s hash %q version %d", what, got.Tenant, got.ID,
			got.RequestHash, got.Version, want.Tenant, want.ID, want.RequestHash, want.Version)
	}
	if !bytes.Equal(got.Spec, want.Spec) || got.Spec == nil {
		t.Errorf("%s spec = %q, want %q", what, got.Spec, want.Spec)
	}
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{{"CreatedAt", got.CreatedAt, want.CreatedAt}, {"UpdatedAt", got.UpdatedAt, want.UpdatedAt}} {
		if ms := tm.want.Truncate(time.Millisecond); !tm.got.Equal(ms) || tm.got.Location() != time.UTC {
			t.Errorf("%s %s = %v, want %v in UTC", what, tm.name, tm.got, ms)
		}
	}
}

func testDestinationCreate(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	_, s := destStore(t, newStore)

	t.Run("new", func(t *testing.T) {
		in := newDest(tenant, "d1", "h1")
		in.Version, in.UpdatedAt = 9, t0.Add(time.Hour) // not the store's to take
		spec := bytes.Clone(in.Spec)
		got := createDest(t, s, in)
		want := &store.Destination{Tenant: tenant, ID: "d1", Spec: spec, RequestHash: "h1", Version: 1,
			CreatedAt: t0, UpdatedAt: t0}
		checkDest(t, "created", got, want)
		// The store keeps its own copy, and hands out fresh ones.
		in.Spec[0], got.Spec[0] = 'X', 'Y'
		read := getDest(t, s, tenant, "d1")
		checkDest(t, "read", read, want)
		read.Spec[0] = 'Z'
		checkDest(t, "read again", getDest(t, s, tenant, "d1"), want)
	})
	t.Run("same request is a repeat", func(t *testing.T) {
		first := createDest(t, s, newDest(tenant, "d2", "h2"))
		again := newDest(tenant, "d2", "h2")
		again.Spec, again.CreatedAt = []byte(`{"secret":"sealed anew"}`), t0.Add(time.Hour)
		got, created, err := s.DestinationCreate(ctx, again)
		if err != nil || created {
			t.Fatalf("repeated DestinationCreate = created %v, %v; want not created", created, err)
		}
		checkDest(t, "repeat", got, first)
	})
	t.Run("other request conflicts", func(t *testing.T) {
		first := createDest(t, s, newDest(tenant, "d3", "h3"))
		_, _, err := s.DestinationCreate(ctx, newDest(tenant, "d3", "other"))
		wantErr(t, "DestinationCreate(other hash)", err, store.ErrConflict)
		checkDest(t, "after the conflict", getDest(t, s, tenant, "d3"), first)
	})
	t.Run("created now", func(t *testing.T) {
		before := time.Now().Truncate(time.Millisecond)
		got := createDest(t, s, &store.Destination{Tenant: tenant, ID: "d4", RequestHash: "h4"})
		after := time.Now()
		if got.CreatedAt.Before(before) || got.CreatedAt.After(after) || !got.UpdatedAt.Equal(got.CreatedAt) || got.Spec == nil {
			t.Errorf("created without a time = %+v, want created and updated between %v and %v, an empty spec", got, before, after)
		}
		checkDest(t, "read", getDest(t, s, tenant, "d4"), got)
	})
	t.Run("tenants are separate", func(t *testing.T) {
		createDest(t, s, newDest(tenant, "shared", "h5"))
		theirs := createDest(t, s, newDest("tenant-b", "shared", "other"))
		checkDest(t, "tenant-b's", getDest(t, s, "tenant-b", "shared"), theirs)
		_, err := s.DestinationGet(ctx, "tenant-c", "shared")
		wantErr(t, "DestinationGet(tenant-c)", err, store.ErrNotFound)
		_, err = s.DestinationGet(ctx, tenant, "missing")
		wantErr(t, "DestinationGet(missing)", err, store.ErrNotFound)
		upd := newDest("tenant-c", "shared", "h5")
		upd.Version = 1
		_, err = s.DestinationUpdate(ctx, upd)
		wantErr(t, "DestinationUpdate(tenant-c)", err, store.ErrNotFound)
		wantErr(t, "DestinationDelete(tenant-c)", s.DestinationDelete(ctx, "tenant-c", "shared", 0), store.ErrNotFound)
		items, _, err := s.DestinationList(ctx, "tenant-b", store.Page{})
		if err != nil || len(items) != 1 || items[0].ID != "shared" || items[0].RequestHash != "other" {
			t.Errorf("DestinationList(tenant-b) = %v, %v; want its one destination", items, err)
		}
	})
	t.Run("empty tenant or ID", func(t *testing.T) {
		for _, k := range []struct{ tn, id string }{{"", "d1"}, {tenant, ""}, {"", ""}} {
			_, _, err := s.DestinationCreate(ctx, newDest(k.tn, k.id, "h"))
			wantErr(t, "DestinationCreate(empty)", err, store.ErrInvalid)
			upd := newDest(k.tn, k.id, "h")
			upd.Version = 1
			_, err = s.DestinationUpdate(ctx, upd)
			wantErr(t, "DestinationUpdate(empty)", err, store.ErrInvalid)
			_, err = s.DestinationGet(ctx, k.tn, k.id)
			wantErr(t, "DestinationGet(empty)", err, store.ErrInvalid)
			wantErr(t, "DestinationDelete(empty)", s.DestinationDelete(ctx, k.tn, k.id, 0), store.ErrInvalid)
		}
		_, _, err := s.DestinationList(ctx, "", store.Page{})
		wantErr(t, "DestinationList(empty tenant)", err, store.ErrInvalid)
	})
}

func testDestinationClose(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	st, s := destStore(t, newStore)
	d := createDest(t, s, newDest(tenant, "d1", "h1"))
	if err := st.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	upd := newDest(tenant, "d1", "h2")
	upd.Version = d.Version
	calls := map[string]error{}
	_, _, calls["DestinationCreate"] = s.DestinationCreate(ctx, newDest(tenant, "d2", "h2"))
	_, calls["DestinationUpdate"] = s.DestinationUpdate(ctx, upd)
	_, calls["DestinationGet"] = s.DestinationGet(ctx, tenant, "d1")
	_, _, calls["DestinationList"] = s.DestinationList(ctx, tenant, store.Page{})
	calls["DestinationDelete"] = s.DestinationDelete(ctx, tenant, "d1", 0)
	for name, err := range calls {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}
