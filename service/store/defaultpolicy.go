package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// DefaultPolicyID is the policy a task that names none follows: the
// tenant's own, when it registered one under this ID, else the built-in
// (BuiltinPolicy). A registered "default" is immutable like any other
// policy; the built-in is never stored.
const DefaultPolicyID = "default"

// BuiltinPolicy returns the built-in default policy: exponential backoff from
// 1 s, doubling, capped at 5 min, full jitter; 10 attempts within a 24 h time
// budget; the retryable statuses of retryhttp (retry.DefaultRetryableStatusCodes:
// 408, 425, 429, 500, 502, 503, 504). The nine waits are at most 1, 2, 4, …
// 256 s, so a task that keeps failing gives up after some 8.5 minutes of
// waiting at most (half that on average); the budget is what bounds a task
// whose target keeps answering long Retry-After hints.
func BuiltinPolicy() retry.Policy {
	return retry.Policy{
		Backoff: backoff.Policy{
			Kind: backoff.Exponential, Base: time.Second, Multiplier: 2, Max: 5 * time.Minute,
			Jitter: backoff.FullJitter,
		},
		MaxAttempts:          10,
		Budget:               24 * time.Hour,
		RetryableStatusCodes: retry.DefaultRetryableStatusCodes(),
	}
}

// builtinSpec is BuiltinPolicy's canonical encoding, as a registration of
// it would be stored.
var builtinSpec = func() []byte {
	b, err := json.Marshal(BuiltinPolicy())
	if err != nil {
		panic("store: the built-in policy does not encode: " + err.Error())
	}
	return b
}()

// BuiltinDefault returns BuiltinPolicy as the tenant's Policy
// DefaultPolicyID, encoded as a registration of it would be stored, with a
// zero CreatedAt: what LookupPolicy answers for a tenant without a
// "default" of its own.
func BuiltinDefault(tenant string) *Policy {
	return &Policy{Tenant: tenant, ID: DefaultPolicyID, Spec: append([]byte(nil), builtinSpec...)}
}

// PolicyGetter is the part of a Store that LookupPolicy reads.
type PolicyGetter interface {
	PolicyGet(ctx context.Context, tenant, id string) (*Policy, error)
}

// LookupPolicy returns the tenant's policy id, or, when the tenant has none
// and id is DefaultPolicyID, the built-in policy (builtin true; its
// CreatedAt is zero). It is the one place that decides which policy a task
// follows, for the API and the scheduler alike. A policy that does not
// exist is ErrNotFound; any other failure is the store's.
func LookupPolicy(ctx context.Context, st PolicyGetter, tenant, id string) (p *Policy, builtin bool, err error) {
	p, err = st.PolicyGet(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) && id == DefaultPolicyID {
		return BuiltinDefault(tenant), true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return p, false, nil
}
