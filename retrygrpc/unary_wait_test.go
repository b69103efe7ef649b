package retrygrpc_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrygrpc"
)

func TestUnaryPushback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		step         step
		budget       time.Duration
		wantErr      error // nil: the call succeeds
		wantAttempts int
		wantSleeps   []time.Duration
	}{
		{name: "raises the wait", step: step{code: codes.Unavailable, pushback: []string{"250"}}, wantAttempts: 2, wantSleeps: []time.Duration{250 * time.Millisecond}},
		{name: "below the backoff", step: step{code: codes.Unavailable, pushback: []string{"1"}}, wantAttempts: 2, wantSleeps: []time.Duration{10 * time.Millisecond}},
		{name: "zero", step: step{code: codes.ResourceExhausted, pushback: []string{"0"}}, wantAttempts: 2, wantSleeps: []time.Duration{10 * time.Millisecond}},
		{name: "beyond the backoff's max", step: step{code: codes.Unavailable, pushback: []string{"5000"}}, wantAttempts: 2, wantSleeps: []time.Duration{5 * time.Second}},
		{name: "without a budget capped at DefaultMaxRetryAfter", step: step{code: codes.Unavailable, pushback: []string{"3600000"}}, wantAttempts: 2, wantSleeps: []time.Duration{retry.DefaultMaxRetryAfter}},
		{name: "beyond the budget stops at once", step: step{code: codes.Unavailable, pushback: []string{"900"}}, budget: 500 * time.Millisecond, wantErr: retry.ErrBudgetExhausted, wantAttempts: 1},
		{name: "negative means do not retry", step: step{code: codes.Unavailable, pushback: []string{"-1"}}, wantErr: retry.ErrNotRetryable, wantAttempts: 1},
		{name: "malformed means do not retry", step: step{code: codes.Unavailable, pushback: []string{"soon"}}, wantErr: retry.ErrNotRetryable, wantAttempts: 1},
		{name: "two values mean do not retry", step: step{code: codes.Unavailable, pushback: []string{"10", "20"}}, wantErr: retry.ErrNotRetryable, wantAttempts: 1},
		{name: "no reason to retry a non-retryable code", step: step{code: codes.InvalidArgument, pushback: []string{"10"}}, wantErr: retry.ErrNotRetryable, wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{tt.step}}
			p, clock := fastPolicy(3)
			p.Budget = tt.budget
			client := setup(t, srv, retrygrpc.Config{Policy: p})

			err := check(t.Context(), client)

			if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if got, want := status.Code(err), tt.step.code; got != want {
					t.Errorf("status.Code = %v, want %v", got, want)
				}
			}
			if got, want := len(srv.Keys()), tt.wantAttempts; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			if got, want := clock.Sleeps(), tt.wantSleeps; !slices.Equal(got, want) {
				t.Errorf("sleeps = %v, want %v", got, want)
			}
		})
	}
}

func TestUnaryAttemptTimeout(t *testing.T) {
	t.Parallel()
	hang := step{hang: true}
	tests := []struct {
		name         string
		steps        []step
		wantErr      error // nil: the call succeeds
		wantAttempts int
	}{
		{name: "a hung attempt is retried", steps: []step{hang}, wantAttempts: 2},
		{name: "every attempt hangs", steps: []step{hang, hang, hang}, wantErr: retry.ErrAttemptsExhausted, wantAttempts: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: tt.steps}
			p, _ := fastPolicy(3)
			// DeadlineExceeded is not among the codes: the attempt's own
			// timeout is retried regardless.
			client := setup(t, srv, retrygrpc.Config{Policy: p, AttemptTimeout: 50 * time.Millisecond})

			err := check(t.Context(), client)

			if got, want := len(srv.Keys()), tt.wantAttempts; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, retrygrpc.ErrAttemptTimeout) {
				t.Errorf("err = %v, want it to wrap %v and ErrAttemptTimeout", err, tt.wantErr)
			}
			if got, want := status.Code(err), codes.DeadlineExceeded; got != want {
				t.Errorf("status.Code = %v, want %v", got, want)
			}
		})
	}
}

func TestUnaryCallerDeadlineNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		attemptTimeout time.Duration
	}{
		{name: "no attempt timeout"},
		{name: "attempt timeout longer than the caller's", attemptTimeout: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{{hang: true}, {hang: true}}}
			client := setup(t, srv, retrygrpc.Config{
				Policy:         retry.Policy{MaxAttempts: 3},
				Codes:          []codes.Code{codes.Unavailable, codes.DeadlineExceeded},
				AttemptTimeout: tt.attemptTimeout,
			})
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()

			err := check(ctx, client)

			if got, want := status.Code(err), codes.DeadlineExceeded; got != want {
				t.Errorf("status.Code = %v, want %v (err: %v)", got, want, err)
			}
			if !errors.Is(err, retry.ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want it to wrap ErrCancelled and context.DeadlineExceeded", err)
			}
			if errors.Is(err, retrygrpc.ErrAttemptTimeout) {
				t.Errorf("err = %v wraps ErrAttemptTimeout; the caller's deadline ended the call", err)
			}
			if got, want := len(srv.Keys()), 1; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
		})
	}
}

func TestUnaryCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	const wait = time.Minute
	srv := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.Unavailable}}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var timer *time.Timer
	client := setup(t, srv, retrygrpc.Config{Policy: retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: wait, Max: backoff.None, Jitter: backoff.NoJitter},
		// OnRetry runs just before the wait: cancel a little into it.
		Observer: retry.OnRetry(func(context.Context, retry.Event) { timer = time.AfterFunc(20*time.Millisecond, cancel) }),
	}})
	start := time.Now()

	err := check(ctx, client)

	if elapsed := time.Since(start); elapsed >= wait {
		t.Errorf("the call took %v: the wait of %v was not cut short", elapsed, wait)
	}
	if timer == nil {
		t.Fatal("OnRetry was not called")
	}
	if got, want := status.Code(err), codes.Canceled; got != want {
		t.Errorf("status.Code = %v, want %v (err: %v)", got, want, err)
	}
	if !errors.Is(err, retry.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to wrap ErrCancelled and context.Canceled", err)
	}
	if got, want := len(srv.Keys()), 1; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
}
