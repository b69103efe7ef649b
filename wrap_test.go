package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

type plainRequest struct{ id string }

// urgentRequest brings its own policy: one attempt, no retries.
type urgentRequest struct{ id string }

func (urgentRequest) RetryPolicy() (retry.Policy, bool) { return retry.Policy{MaxAttempts: 1}, true }

func TestWrap(t *testing.T) {
	t.Parallel()
	noDelay := backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}
	calls := map[string]int{}
	handler := func(_ context.Context, id string) (string, error) {
		calls[id]++
		if calls[id] < 3 {
			return "", errFlaky
		}
		return "ok " + id, nil
	}
	plain := retry.Wrap(retry.Policy{MaxAttempts: 5, Backoff: noDelay}, func(ctx context.Context, r plainRequest) (string, error) { return handler(ctx, r.id) })
	got, err := plain(context.Background(), plainRequest{"p"})
	if got != "ok p" || err != nil || calls["p"] != 3 {
		t.Errorf("plain request: %q, %v after %d calls; want ok p after 3", got, err, calls["p"])
	}
	urgent := retry.Wrap(retry.Policy{MaxAttempts: 5, Backoff: noDelay}, func(ctx context.Context, r urgentRequest) (string, error) { return handler(ctx, r.id) })
	_, err = urgent(context.Background(), urgentRequest{"u"})
	if !errors.Is(err, retry.ErrAttemptsExhausted) || calls["u"] != 1 {
		t.Errorf("urgent request: %v after %d calls; want its own single attempt", err, calls["u"])
	}
}
