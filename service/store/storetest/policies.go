package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

func testPolicyPut(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	spec := []byte(`{"backoff":"EXPONENTIAL","initialDelayMs":100,"maxAttempts":5}`)
	put := func(t *testing.T, s store.Store, tn, id string, spec []byte) (*store.Policy, bool, error) {
		t.Helper()
		return s.PolicyPut(ctx, &store.Policy{Tenant: tn, ID: id, Spec: spec, CreatedAt: t0})
	}

	t.Run("new", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		in := &store.Policy{Tenant: tenant, ID: "p1", Spec: bytes.Clone(spec), CreatedAt: t0.Add(456789)}
		got, created, err := s.PolicyPut(ctx, in)
		if err != nil || !created {
			t.Fatalf("PolicyPut() = created %v, %v; want created", created, err)
		}
		in.Spec[0] = 'X' // the store must have kept its own copy
		for _, p := range []*store.Policy{got, mustPolicy(t, s, tenant, "p1")} {
			if p.Tenant != tenant || p.ID != "p1" || !bytes.Equal(p.Spec, spec) || !sameTime(p.CreatedAt, t0) {
				t.Errorf("policy = %+v, want tenant %s id p1 spec %s at %v", p, tenant, spec, t0)
			}
		}
	})
	t.Run("same spec is a repeat", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		if _, _, err := put(t, s, tenant, "p1", spec); err != nil {
			t.Fatal(err)
		}
		got, created, err := s.PolicyPut(ctx, &store.Policy{Tenant: tenant, ID: "p1", Spec: spec, CreatedAt: t0.Add(time.Hour)})
		if err != nil || created {
			t.Fatalf("second PolicyPut() = created %v, %v; want not created", created, err)
		}
		if !sameTime(got.CreatedAt, t0) || !bytes.Equal(got.Spec, spec) {
			t.Errorf("repeat returned %+v, want the first registration (created %v)", got, t0)
		}
	})
	t.Run("other spec conflicts", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		if _, _, err := put(t, s, tenant, "p1", spec); err != nil {
			t.Fatal(err)
		}
		_, _, err := put(t, s, tenant, "p1", []byte(`{"backoff":"FIXED"}`))
		wantErr(t, "PolicyPut(other spec)", err, store.ErrConflict)
		if got := mustPolicy(t, s, tenant, "p1"); !bytes.Equal(got.Spec, spec) {
			t.Errorf("after the conflict spec = %s, want %s", got.Spec, spec)
		}
	})
	t.Run("tenants are separate", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		if _, _, err := put(t, s, tenant, "p1", spec); err != nil {
			t.Fatal(err)
		}
		other := []byte(`{"backoff":"LINEAR"}`)
		if _, created, err := put(t, s, "tenant-b", "p1", other); err != nil || !created {
			t.Fatalf("PolicyPut(tenant-b, p1) = created %v, %v; want created", created, err)
		}
		if got := mustPolicy(t, s, "tenant-b", "p1"); !bytes.Equal(got.Spec, other) {
			t.Errorf("tenant-b's p1 spec = %s, want %s", got.Spec, other)
		}
		_, err := s.PolicyGet(ctx, "tenant-c", "p1")
		wantErr(t, "PolicyGet(tenant-c)", err, store.ErrNotFound)
		_, err = s.PolicyGet(ctx, tenant, "missing")
		wantErr(t, "PolicyGet(missing)", err, store.ErrNotFound)
	})
}

func mustPolicy(t *testing.T, s store.Store, tn, id string) *store.Policy {
	t.Helper()
	p, err := s.PolicyGet(context.Background(), tn, id)
	if err != nil {
		t.Fatalf("PolicyGet(%s, %s) = %v", tn, id, err)
	}
	return p
}

func testPolicyList(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := setup(t, newStore)
	var want []string
	for _, id := range []string{"g", "c", "a", "e", "b", "f", "d"} {
		if _, _, err := s.PolicyPut(ctx, &store.Policy{Tenant: tenant, ID: id, Spec: []byte(`{}`), CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	slices.Sort(want)
	if _, _, err := s.PolicyPut(ctx, &store.Policy{Tenant: "tenant-b", ID: "b2", Spec: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}

	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("PolicyList kept paging: %v", got)
		}
		items, next, err := s.PolicyList(ctx, tenant, store.Page{Token: token, Limit: 3})
		if err != nil {
			t.Fatalf("PolicyList(page %d) = %v", pages, err)
		}
		if len(items) > 3 {
			t.Fatalf("page %d has %d items, want at most 3", pages, len(items))
		}
		for _, p := range items {
			got = append(got, p.ID)
		}
		if next == "" {
			break
		}
		token = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("PolicyList pages = %v, want %v", got, want)
	}
	_, _, err := s.PolicyList(ctx, tenant, store.Page{Token: "not a token"})
	wantErr(t, "PolicyList(bad token)", err, store.ErrInvalid)
	items, next, err := s.PolicyList(ctx, "tenant-none", store.Page{})
	if err != nil || len(items) != 0 || next != "" {
		t.Errorf("PolicyList(tenant-none) = %d items, %q, %v; want none", len(items), next, err)
	}
}
