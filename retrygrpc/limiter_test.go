package retrygrpc_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
)

// TestLimitersPerTarget: a real gRPC server on 127.0.0.1 answers
// UNAVAILABLE and RESOURCE_EXHAUSTED, then OK; its target's limiter is
// slowed down, and the limiters are one per target.
func TestLimitersPerTarget(t *testing.T) {
	t.Parallel()
	ls, err := retry.NewLimiters(retry.LimiterConfig{Floor: 5, Ceiling: 100, CircuitAfter: -1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := fastPolicy(4)
	busy := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.ResourceExhausted}}}
	fine := &healthServer{}
	for _, srv := range []*healthServer{busy, fine} {
		client := setup(t, srv, retrygrpc.Config{Policy: p, Limiters: ls})
		if err := check(t.Context(), client); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(busy.Keys()); got != 3 {
		t.Errorf("the busy server got %d attempts, want 3", got)
	}
	if got := ls.Len(); got != 2 {
		t.Fatalf("%d limiters, want one per target", got)
	}
}

// TestLimitersCircuitOpensOnUnavailable: a target answering nothing but
// UNAVAILABLE opens its circuit; the next call makes no attempt and fails
// with ErrCircuitOpen, its status still UNAVAILABLE.
func TestLimitersCircuitOpensOnUnavailable(t *testing.T) {
	t.Parallel()
	ls, err := retry.NewLimiters(retry.LimiterConfig{Ceiling: 100, CircuitAfter: 25 * time.Millisecond, OpenFor: time.Hour}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := fastPolicy(10)
	p.Budget = time.Minute
	srv := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.Unavailable}, {code: codes.Unavailable}, {code: codes.Unavailable}, {code: codes.Unavailable}, {code: codes.Unavailable}}}
	client := setup(t, srv, retrygrpc.Config{Policy: p, Limiters: ls})
	err = check(t.Context(), client)
	if !errors.Is(err, retry.ErrCircuitOpen) || status.Code(err) != codes.Unavailable {
		t.Errorf("first call: %v; want ErrCircuitOpen with the last UNAVAILABLE", err)
	}
	n := len(srv.Keys())
	err = check(t.Context(), client)
	if !errors.Is(err, retry.ErrCircuitOpen) || len(srv.Keys()) != n {
		t.Errorf("next call: %v after %d more attempts; want ErrCircuitOpen and none", err, len(srv.Keys())-n)
	}
}
