package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/store"
)

// policyReads is the real store, counting the policy reads that go to it.
type policyReads struct {
	store.Store
	n atomic.Int64
}

func (p *policyReads) PolicyGet(ctx context.Context, tenant, id string) (*store.Policy, error) {
	p.n.Add(1)
	return p.Store.PolicyGet(ctx, tenant, id)
}

// setupReads is setup with the API's policy reads counted.
func setupReads(t *testing.T, o options) (*env, *policyReads) {
	t.Helper()
	reads := &policyReads{}
	o.wrap = func(st store.Store) store.Store { reads.Store = st; return reads }
	return setup(t, o), reads
}

// putStored registers a policy in the store directly, as another retryd
// sharing it would, so that this API has not seen it.
func putStored(t *testing.T, st store.Store, tenant, id string) {
	t.Helper()
	if _, _, err := st.PolicyPut(context.Background(), &store.Policy{Tenant: tenant, ID: id, Spec: []byte(`{"maxAttempts":3}`)}); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyCache(t *testing.T) {
	t.Parallel()
	e, reads := setupReads(t, options{})
	wantReads := func(want int64, when string) {
		t.Helper()
		if got := reads.n.Load(); got != want {
			t.Errorf("%s: %d policy reads, want %d", when, got, want)
		}
	}

	// A policy registered through this API is known without a read.
	e.putPolicy(t, `{"policyId":"p"}`)
	for i := range 5 {
		e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/%d","policyId":"p"}`, i))
	}
	wantReads(0, "creates naming a policy registered here")

	// One registered elsewhere is read once, then known.
	putStored(t, e.store, api.DefaultTenant, "q")
	for i := range 5 {
		e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/%d","policyId":"q"}`, i))
	}
	wantReads(1, "creates naming a policy registered elsewhere")

	// Absence is not remembered: once registered, the policy is found.
	unknown := `{"targetUrl":"http://h/","policyId":"r"}`
	e.do(t, "POST", "/retry-tasks", unknown).wantError(t, http.StatusBadRequest, "unknown_policy", "policyId")
	e.do(t, "POST", "/retry-tasks", unknown).wantError(t, http.StatusBadRequest, "unknown_policy", "policyId")
	wantReads(3, "creates naming an unknown policy")
	putStored(t, e.store, api.DefaultTenant, "r")
	e.createTask(t, unknown)
	wantReads(4, "a create naming a policy registered since")

	// A batch reads each distinct policy it does not know once.
	putStored(t, e.store, api.DefaultTenant, "s")
	putStored(t, e.store, api.DefaultTenant, "t")
	tasks := make([]string, 999)
	for i := range tasks {
		tasks[i] = fmt.Sprintf(`{"targetUrl":"http://h/%d","policyId":%q}`, i, []string{"p", "s", "t", "u"}[i%4])
	}
	items := e.batchItems(t, `{"tasks":[`+strings.Join(tasks, ",")+`]}`)
	for i, item := range items {
		if i%4 == 3 {
			wantItemError(t, i, item, http.StatusBadRequest, "unknown_policy", fmt.Sprintf("tasks[%d].policyId", i))
		} else {
			wantItemTask(t, i, item, http.StatusCreated)
		}
	}
	wantReads(7, "a batch naming p (known), s and t (registered elsewhere) and u (unknown)")
}

// The cache is per tenant: one tenant's policy is not another's.
func TestPolicyCacheTenants(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	e.putPolicy(t, `{"policyId":"p"}`)
	e.createTask(t, `{"targetUrl":"http://h/","policyId":"p"}`)
	b := *e
	b.token = tokenB
	b.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"p"}`).wantError(t, http.StatusBadRequest, "unknown_policy", "policyId")
}

func TestPolicyCacheOff(t *testing.T) {
	t.Parallel()
	e, reads := setupReads(t, options{policyCache: -1})
	e.putPolicy(t, `{"policyId":"p"}`)
	for i := range 3 {
		e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/%d","policyId":"p"}`, i))
	}
	if got := reads.n.Load(); got != 3 {
		t.Errorf("%d policy reads with the cache off, want one per create (3)", got)
	}
}

// A small cache forgets, and then reads the store again; the answers stay
// right.
func TestPolicyCacheBounded(t *testing.T) {
	t.Parallel()
	e, reads := setupReads(t, options{policyCache: 2})
	for i := range 6 {
		putStored(t, e.store, api.DefaultTenant, fmt.Sprint("p", i))
	}
	for round := range 2 {
		for i := range 6 {
			e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/%d/%d","policyId":"p%d"}`, round, i, i))
		}
	}
	if got := reads.n.Load(); got != 12 {
		t.Errorf("%d policy reads cycling 6 policies through a cache of 2, want 12", got)
	}
}
