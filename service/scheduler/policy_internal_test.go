package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// The built-in default is followed until the tenant registers its own,
// which is looked for again after builtinRecheck; a registered policy is
// kept for good.
func TestPolicyCacheRechecksTheBuiltin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &Scheduler{st: st, log: slog.New(slog.DiscardHandler)}
	s.storeRetry = storeRetryPolicy(retry.Policy{MaxAttempts: 1}, s.log)

	now := time.Now()
	p, err := s.policyAt(ctx, "t", store.DefaultPolicyID, now)
	if err != nil || p.Attempts() != 10 {
		t.Fatalf("default = %+v, %v; want the built-in's 10 attempts", p, err)
	}
	if _, _, err := st.PolicyPut(ctx, &store.Policy{Tenant: "t", ID: store.DefaultPolicyID, Spec: []byte(`{"maxAttempts":2}`)}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.policyAt(ctx, "t", store.DefaultPolicyID, now.Add(builtinRecheck-time.Second)); p.Attempts() != 10 {
		t.Errorf("before the recheck: %d attempts, want the cached built-in's 10", p.Attempts())
	}
	if p, _ := s.policyAt(ctx, "t", store.DefaultPolicyID, now.Add(builtinRecheck)); p.Attempts() != 2 {
		t.Errorf("after the recheck: %d attempts, want the tenant's own 2", p.Attempts())
	}
	// Another policy ID has no built-in.
	if _, err := s.policyAt(ctx, "t", "other", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown policy = %v, want ErrNotFound", err)
	}
	// The tenant's own is kept: a store that no longer answers is not asked.
	st.Close()
	if p, err := s.policyAt(ctx, "t", store.DefaultPolicyID, now.Add(24*time.Hour)); err != nil || p.Attempts() != 2 {
		t.Errorf("a day on = %+v, %v; want the tenant's own from the cache", p, err)
	}
}
