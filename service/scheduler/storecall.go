package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
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
		return s.st.TaskDue(ctx, func(d store.Due) {
			s.mu.Lock()
			s.heap.set(d)
			s.mu.Unlock()
		})
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

// policyCache keeps decoded policies. Policies are immutable, so an entry
// never goes stale; there is one per (tenant, policy) in use.
type policyCache struct {
	mu sync.RWMutex
	m  map[[2]string]*retry.Policy
}

// policy returns the decoded policy of a task, from the cache or the store.
func (s *Scheduler) policy(ctx context.Context, tenant, id string) (*retry.Policy, error) {
	key := [2]string{tenant, id}
	s.pols.mu.RLock()
	p, ok := s.pols.m[key]
	s.pols.mu.RUnlock()
	if ok {
		return p, nil
	}
	var stored *store.Policy
	err := s.storeCall(ctx, "PolicyGet", func(ctx context.Context) (err error) {
		stored, err = s.st.PolicyGet(ctx, tenant, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	p = new(retry.Policy)
	if err := json.Unmarshal(stored.Spec, p); err != nil {
		return nil, err
	}
	s.pols.mu.Lock()
	if s.pols.m == nil {
		s.pols.m = make(map[[2]string]*retry.Policy)
	}
	s.pols.m[key] = p
	s.pols.mu.Unlock()
	return p, nil
}
