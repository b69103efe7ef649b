package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
)

// policies is a PolicyGetter of a map, or of one error.
type policies struct {
	m   map[string]*store.Policy
	err error
}

func (p policies) PolicyGet(_ context.Context, tenant, id string) (*store.Policy, error) {
	if p.err != nil {
		return nil, p.err
	}
	if got, ok := p.m[tenant+"/"+id]; ok {
		return got, nil
	}
	return nil, store.ErrNotFound
}

func TestBuiltinPolicy(t *testing.T) {
	t.Parallel()
	p := store.BuiltinPolicy()
	want := backoff.Policy{Kind: backoff.Exponential, Base: time.Second, Multiplier: 2, Max: 5 * time.Minute, Jitter: backoff.FullJitter}
	if !reflect.DeepEqual(p.Backoff, want) || p.MaxAttempts != 10 || p.Budget != 24*time.Hour {
		t.Errorf("BuiltinPolicy = %+v", p)
	}
	if got, want := p.RetryableStatusCodes, retry.DefaultRetryableStatusCodes(); !reflect.DeepEqual(got, want) {
		t.Errorf("retryable statuses = %v, want %v", got, want)
	}
}

func TestLookupPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := &store.Policy{Tenant: "a", ID: store.DefaultPolicyID, Spec: []byte(`{"maxAttempts":2}`)}
	st := policies{m: map[string]*store.Policy{"a/default": own}}

	got, builtin, err := store.LookupPolicy(ctx, st, "a", store.DefaultPolicyID)
	if err != nil || builtin || got != own {
		t.Errorf("tenant a's default = %v, %v, %v; want its own", got, builtin, err)
	}
	got, builtin, err = store.LookupPolicy(ctx, st, "b", store.DefaultPolicyID)
	if err != nil || !builtin || got.ID != store.DefaultPolicyID || got.Tenant != "b" {
		t.Fatalf("tenant b's default = %v, %v, %v; want the built-in", got, builtin, err)
	}
	var p retry.Policy
	if err := json.Unmarshal(got.Spec, &p); err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, p), mustJSON(t, store.BuiltinPolicy()); a != b {
		t.Errorf("the built-in's spec decodes to %s, want %s", a, b)
	}
	got.Spec[0] = 'x' // a fresh value each time
	if again, _, _ := store.LookupPolicy(ctx, st, "b", store.DefaultPolicyID); again.Spec[0] != '{' {
		t.Error("LookupPolicy returned a spec shared between calls")
	}
	if _, _, err := store.LookupPolicy(ctx, st, "b", "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown policy = %v, want ErrNotFound", err)
	}
	down := errors.New("store down")
	if _, _, err := store.LookupPolicy(ctx, policies{err: down}, "b", store.DefaultPolicyID); !errors.Is(err, down) {
		t.Errorf("a failing store = %v, want its error, not the built-in", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
