package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/store"
)

// storeRetryPolicy completes the policy store calls are retried with: a
// store that is briefly unavailable (a restarting database, a full disk
// being cleared) slows the scheduler down instead of losing outcomes.
func storeRetryPolicy(p retry.Policy, log *slog.Logger) retry.Policy {
	if p.Backoff.IsZero() && p.MaxAttempts == 0 && p.Budget == 0 {
		p.Backoff = backoff.Policy{Kind: backoff.Exponential, Base: 20 * time.Millisecond, Max: 2 * time.Second}
		p.MaxAttempts = math.MaxInt32 // until the context ends
	}
	if p.Classifier == nil {
		p.Classifier = retry.ClassifierFunc(func(err error) retry.Decision {
			for _, final := range []error{store.ErrNotFound, store.ErrConflict, store.ErrLeaseLost, store.ErrInvalid, store.ErrClosed} {
				if errors.Is(err, final) {
					return retry.NoRetry
				}
			}
			return retry.Retry
		})
	}
	if p.Logger == nil {
		p.Logger = log
	}
	return p
}

// storeCall runs one store call under the store retry policy.
func (s *Scheduler) storeCall(ctx context.Context, name string, call func(context.Context) error) error {
	p := s.storeRetry
	p.Name = "store." + name
	return retry.Do(ctx, p, call)
}

// resync files every PENDING and IN_FLIGHT task of every tenant in the
// heap, as the store has it. At start it builds the heap; later it repairs
// whatever the heap missed (another node's writes, a lost Wake).
func (s *Scheduler) resync(ctx context.Context) error {
	err := s.storeCall(ctx, "TaskDue", func(ctx context.Context) error {
		return s.st.TaskDue(ctx, s.file) // file wakes the claim loop for a new first entry
	})
	if err != nil {
		return err
	}
	signal(s.wakeC)
	return nil
}

func (s *Scheduler) resyncLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.resync(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("scheduler: resync failed", "error", err)
			}
		}
	}
}

// builtinRecheck is how long the scheduler follows the built-in "default"
// policy for a tenant before it asks the store again whether the tenant
// registered a "default" of its own, which its tasks then follow.
const builtinRecheck = time.Minute

// policyCache keeps decoded policies. Policies are immutable, so an entry
// of a registered policy never goes stale; there is one per (tenant,
// policy) in use. The built-in default is kept for builtinRecheck only,
// since a registration may replace it.
type policyCache struct {
	mu sync.RWMutex
	m  map[[2]string]cachedPolicy
}

type cachedPolicy struct {
	p     *retry.Policy
	host  hostlimit.Setting // the policy's hostLimiter
	until time.Time         // zero: for good
}

// policy returns the decoded policy of a task, and its host limiter
// setting, from the cache or the store (store.LookupPolicy: the tenant's
// own, or the built-in for "default").
func (s *Scheduler) policy(ctx context.Context, tenant, id string) (*retry.Policy, hostlimit.Setting, error) {
	c, err := s.lookupPolicy(ctx, tenant, id, time.Now())
	return c.p, c.host, err
}

// policyAt is policy as of now, which judges whether a cached built-in is
// due for another look.
func (s *Scheduler) policyAt(ctx context.Context, tenant, id string, now time.Time) (*retry.Policy, error) {
	c, err := s.lookupPolicy(ctx, tenant, id, now)
	return c.p, err
}

func (s *Scheduler) lookupPolicy(ctx context.Context, tenant, id string, now time.Time) (cachedPolicy, error) {
	key := [2]string{tenant, id}
	s.pols.mu.RLock()
	c, ok := s.pols.m[key]
	s.pols.mu.RUnlock()
	if ok && (c.until.IsZero() || now.Before(c.until)) {
		return c, nil
	}
	var (
		stored  *store.Policy
		builtin bool
	)
	err := s.storeCall(ctx, "PolicyGet", func(ctx context.Context) (err error) {
		stored, builtin, err = store.LookupPolicy(ctx, s.st, tenant, id)
		return err
	})
	if err != nil {
		return cachedPolicy{}, err
	}
	p, host, err := hostlimit.Decode(stored.Spec)
	if err != nil {
		return cachedPolicy{}, fmt.Errorf("decoding policy %q: %w", id, err)
	}
	c = cachedPolicy{p: p, host: host}
	if builtin {
		c.until = now.Add(builtinRecheck)
	}
	s.pols.mu.Lock()
	if s.pols.m == nil {
		s.pols.m = make(map[[2]string]cachedPolicy)
	}
	s.pols.m[key] = c
	s.pols.mu.Unlock()
	return c, nil
}
