package retryhttp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retryhttp"
)

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := retryhttp.DefaultPolicy()
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy().Validate() = %v", err)
	}
	want := backoff.Policy{Kind: backoff.Exponential, Base: retryhttp.DefaultBaseDelay, Multiplier: 2, Max: retryhttp.DefaultMaxDelay, Jitter: backoff.FullJitter}
	if got := p.Backoff; got.Kind != want.Kind || got.Base != want.Base || got.Multiplier != want.Multiplier || got.Max != want.Max || got.Jitter != want.Jitter {
		t.Errorf("DefaultPolicy().Backoff = %+v, want %+v", got, want)
	}
	if got, want := p.MaxAttempts, retryhttp.DefaultMaxAttempts; got != want {
		t.Errorf("MaxAttempts = %d, want %d", got, want)
	}
	if got, want := p.Budget, retryhttp.DefaultBudget; got != want {
		t.Errorf("Budget = %v, want %v", got, want)
	}
}

// A Transport whose Policy sets nothing but a clock and a hook runs on the
// defaults: bounded attempts, exponential full-jitter delays.
func TestZeroPolicyFieldsTakeDefaults(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 503})
	clock := newClock()
	var maxAttempts []int
	policy := retry.Policy{Clock: clock, Observer: retry.OnRetry(func(_ context.Context, a retry.Event) { maxAttempts = append(maxAttempts, a.MaxAttempts) })}
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: policy}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	resp.Body.Close()
	if got, want := len(srv.received()), retryhttp.DefaultMaxAttempts; got != want {
		t.Errorf("server saw %d requests, want %d", got, want)
	}
	if len(maxAttempts) == 0 || maxAttempts[0] != retryhttp.DefaultMaxAttempts {
		t.Errorf("OnRetry saw MaxAttempts %v, want %d", maxAttempts, retryhttp.DefaultMaxAttempts)
	}
	for i, d := range clock.Sleeps() {
		if ceiling := retryhttp.DefaultBaseDelay << i; d < 0 || d > ceiling {
			t.Errorf("sleep %d = %v, want within [0, %v]", i+1, d, ceiling)
		}
	}
}

func TestZeroTransport(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 502}, reply{status: 200, body: "ok"})
	client := &http.Client{Transport: &retryhttp.Transport{}}
	t.Cleanup(client.CloseIdleConnections)

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, want := readBody(t, resp), "ok"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
}

func TestNewClient(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 429, retryAfter: "0"}, reply{status: 200, body: "ok"})
	client := retryhttp.NewClient(retry.Policy{MaxAttempts: 2, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}})
	t.Cleanup(client.CloseIdleConnections)

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, want := readBody(t, resp), "ok"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
}
