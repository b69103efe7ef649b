package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// changeOf returns a change of d made from version, to a spec and request
// hash following hash, at t0 plus a minute and a fraction of a millisecond.
func changeOf(d *store.Destination, version int64, hash string) *store.Destination {
	c := newDest(d.Tenant, d.ID, hash)
	c.Version, c.CreatedAt, c.UpdatedAt = version, t0.Add(time.Hour), t0.Add(time.Minute+789*time.Microsecond)
	return c
}

func testDestinationUpdate(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	_, s := destStore(t, newStore)

	t.Run("bumps the version", func(t *testing.T) {
		d := createDest(t, s, newDest(tenant, "d1", "h1"))
		in := changeOf(d, 1, "h2")
		spec := bytes.Clone(in.Spec)
		got, err := s.DestinationUpdate(ctx, in)
		if err != nil {
			t.Fatalf("DestinationUpdate(version 1) = %v", err)
		}
		want := &store.Destination{Tenant: tenant, ID: "d1", Spec: spec, RequestHash: "h2", Version: 2,
			CreatedAt: t0, UpdatedAt: in.UpdatedAt}
		checkDest(t, "updated", got, want)
		in.Spec[0], got.Spec[0] = 'X', 'Y' // the store keeps its own copy
		checkDest(t, "read", getDest(t, s, tenant, "d1"), want)

		again := changeOf(d, 2, "h3")
		again.UpdatedAt = t0.Add(2 * time.Minute)
		if got, err := s.DestinationUpdate(ctx, again); err != nil || got.Version != 3 || !got.UpdatedAt.Equal(again.UpdatedAt) {
			t.Errorf("DestinationUpdate(version 2) = %+v, %v; want version 3", got, err)
		}
	})
	t.Run("stale version conflicts", func(t *testing.T) {
		d := createDest(t, s, newDest(tenant, "d2", "h1"))
		want, err := s.DestinationUpdate(ctx, changeOf(d, 1, "h2"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int64{1, 3, 0} {
			_, err := s.DestinationUpdate(ctx, changeOf(d, v, fmt.Sprint("stale-", v)))
			wantErr(t, fmt.Sprintf("DestinationUpdate(version %d of 2)", v), err, store.ErrConflict)
		}
		checkDest(t, "after the conflicts", getDest(t, s, tenant, "d2"), want)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := s.DestinationUpdate(ctx, changeOf(&store.Destination{Tenant: tenant, ID: "missing"}, 1, "h"))
		wantErr(t, "DestinationUpdate(missing)", err, store.ErrNotFound)
	})
	t.Run("updated now", func(t *testing.T) {
		d := createDest(t, s, newDest(tenant, "d3", "h1"))
		in := changeOf(d, 1, "h2")
		in.UpdatedAt = time.Time{}
		before := time.Now().Truncate(time.Millisecond)
		got, err := s.DestinationUpdate(ctx, in)
		if err != nil || got.UpdatedAt.Before(before) || got.UpdatedAt.After(time.Now()) || !got.CreatedAt.Equal(d.CreatedAt) {
			t.Errorf("DestinationUpdate without a time = %+v, %v; want updated now, created as before", got, err)
		}
	})
	t.Run("concurrent changes", func(t *testing.T) {
		// Of several changes made from one version, one wins; the others
		// are told they lost it.
		d := createDest(t, s, newDest(tenant, "d4", "h1"))
		const n = 8
		got := make([]*store.Destination, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = s.DestinationUpdate(ctx, changeOf(d, 1, fmt.Sprint("writer-", i))) })
		}
		wg.Wait()
		var won []int
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, i)
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("writer %d: DestinationUpdate = %v, want nil or ErrConflict", i, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("writers %v won, want one", won)
		}
		checkDest(t, "after the race", getDest(t, s, tenant, "d4"), got[won[0]])
	})
}

func testDestinationDelete(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	_, s := destStore(t, newStore)
	gone := func(t *testing.T, id string) {
		t.Helper()
		_, err := s.DestinationGet(ctx, tenant, id)
		wantErr(t, "DestinationGet(deleted)", err, store.ErrNotFound)
	}

	t.Run("at any version", func(t *testing.T) {
		d := createDest(t, s, newDest(tenant, "d1", "h1"))
		if _, err := s.DestinationUpdate(ctx, changeOf(d, 1, "h2")); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "DestinationDelete(version 0)", s.DestinationDelete(ctx, tenant, "d1", 0), nil)
		gone(t, "d1")
		wantErr(t, "DestinationDelete(deleted)", s.DestinationDelete(ctx, tenant, "d1", 0), store.ErrNotFound)
		_, err := s.DestinationUpdate(ctx, changeOf(d, 2, "h3"))
		wantErr(t, "DestinationUpdate(deleted)", err, store.ErrNotFound)
	})
	t.Run("at its version", func(t *testing.T) {
		createDest(t, s, newDest(tenant, "d2", "h1"))
		wantErr(t, "DestinationDelete(version 1)", s.DestinationDelete(ctx, tenant, "d2", 1), nil)
		gone(t, "d2")
	})
	t.Run("stale version conflicts", func(t *testing.T) {
		d := createDest(t, s, newDest(tenant, "d3", "h1"))
		want, err := s.DestinationUpdate(ctx, changeOf(d, 1, "h2"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []int64{1, 3} {
			wantErr(t, fmt.Sprintf("DestinationDelete(version %d of 2)", v), s.DestinationDelete(ctx, tenant, "d3", v), store.ErrConflict)
		}
		checkDest(t, "after the conflicts", getDest(t, s, tenant, "d3"), want)
		wantErr(t, "DestinationDelete(version 2)", s.DestinationDelete(ctx, tenant, "d3", 2), nil)
		gone(t, "d3")
	})
	t.Run("missing", func(t *testing.T) {
		for _, v := range []int64{0, 1} {
			wantErr(t, "DestinationDelete(missing)", s.DestinationDelete(ctx, tenant, "missing", v), store.ErrNotFound)
		}
	})
	t.Run("an ID deleted is free again", func(t *testing.T) {
		createDest(t, s, newDest(tenant, "d4", "h1"))
		wantErr(t, "DestinationDelete", s.DestinationDelete(ctx, tenant, "d4", 1), nil)
		got := createDest(t, s, newDest(tenant, "d4", "other"))
		if got.Version != 1 || got.RequestHash != "other" {
			t.Errorf("created again = %+v, want version 1 of the new request", got)
		}
	})
}

func testDestinationList(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	st, s := destStore(t, newStore)
	var want []string
	for _, id := range []string{"g", "c", "a", "e", "b", "f", "d", "h"} {
		createDest(t, s, newDest(tenant, id, "h-"+id))
		want = append(want, id)
	}
	createDest(t, s, newDest("tenant-b", "b2", "h"))
	if err := s.DestinationDelete(ctx, tenant, "e", 0); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(id string) bool { return id == "e" })
	slices.Sort(want)

	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("DestinationList kept paging: %v", got)
		}
		items, next, err := s.DestinationList(ctx, tenant, store.Page{Token: token, Limit: 3})
		if err != nil {
			t.Fatalf("DestinationList(page %d) = %v", pages, err)
		}
		if len(items) > 3 {
			t.Fatalf("page %d has %d items, want at most 3", pages, len(items))
		}
		for _, d := range items {
			checkDest(t, "listed "+d.ID, d, &store.Destination{Tenant: tenant, ID: d.ID, RequestHash: "h-" + d.ID,
				Spec: newDest(tenant, d.ID, "h-"+d.ID).Spec, Version: 1, CreatedAt: t0, UpdatedAt: t0})
			got = append(got, d.ID)
		}
		if next == "" {
			break
		}
		token = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DestinationList pages = %v, want %v", got, want)
	}
	if items, next, err := s.DestinationList(ctx, tenant, store.Page{}); err != nil || len(items) != len(want) || next != "" {
		t.Errorf("DestinationList(default limit) = %d items, %q, %v; want %d in one page", len(items), next, err, len(want))
	}

	_, _, err := s.DestinationList(ctx, tenant, store.Page{Token: "not a token"})
	wantErr(t, "DestinationList(bad token)", err, store.ErrInvalid)
	// A token of another list is no token of this one.
	for _, id := range []string{"p1", "p2"} {
		if _, _, err := st.PolicyPut(ctx, &store.Policy{Tenant: tenant, ID: id, Spec: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	_, policyToken, err := st.PolicyList(ctx, tenant, store.Page{Limit: 1})
	if err != nil || policyToken == "" {
		t.Fatalf("PolicyList(limit 1) = %q, %v; want a next page", policyToken, err)
	}
	_, _, err = s.DestinationList(ctx, tenant, store.Page{Token: policyToken})
	wantErr(t, "DestinationList(a policy list's token)", err, store.ErrInvalid)

	items, next, err := s.DestinationList(ctx, "tenant-none", store.Page{})
	if err != nil || len(items) != 0 || next != "" {
		t.Errorf("DestinationList(tenant-none) = %d items, %q, %v; want none", len(items), next, err)
	}
}
