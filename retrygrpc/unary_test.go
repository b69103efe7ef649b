package retrygrpc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrygrpc"
)

func check(ctx context.Context, client healthpb.HealthClient) error {
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	return err
}

func TestUnaryCodes(t *testing.T) {
	t.Parallel()
	fail := func(cs ...codes.Code) []step {
		var steps []step
		for _, c := range cs {
			steps = append(steps, step{code: c})
		}
		return steps
	}
	tests := []struct {
		name         string
		codes        []codes.Code
		steps        []step
		wantCode     codes.Code
		wantMessage  string
		wantAttempts int
		wantReason   error
	}{
		{name: "unavailable retried", steps: fail(codes.Unavailable, codes.Unavailable), wantCode: codes.OK, wantAttempts: 3},
		{name: "resource exhausted retried", steps: fail(codes.ResourceExhausted), wantCode: codes.OK, wantAttempts: 2},
		{name: "deadline exceeded not by default", steps: fail(codes.DeadlineExceeded), wantCode: codes.DeadlineExceeded, wantMessage: "attempt 1", wantAttempts: 1, wantReason: retry.ErrNotRetryable},
		{name: "deadline exceeded opted in", codes: []codes.Code{codes.Unavailable, codes.DeadlineExceeded}, steps: fail(codes.DeadlineExceeded), wantCode: codes.OK, wantAttempts: 2},
		{name: "aborted not by default", steps: fail(codes.Aborted), wantCode: codes.Aborted, wantMessage: "attempt 1", wantAttempts: 1, wantReason: retry.ErrNotRetryable},
		{name: "aborted opted in", codes: []codes.Code{codes.Aborted}, steps: fail(codes.Aborted, codes.Aborted), wantCode: codes.OK, wantAttempts: 3},
		{name: "opting in replaces the defaults", codes: []codes.Code{codes.Aborted}, steps: fail(codes.Unavailable), wantCode: codes.Unavailable, wantMessage: "attempt 1", wantAttempts: 1, wantReason: retry.ErrNotRetryable},
		{name: "invalid argument never", steps: fail(codes.InvalidArgument), wantCode: codes.InvalidArgument, wantMessage: "attempt 1", wantAttempts: 1, wantReason: retry.ErrNotRetryable},
		{name: "not retryable after a retryable one", steps: fail(codes.Unavailable, codes.PermissionDenied), wantCode: codes.PermissionDenied, wantMessage: "attempt 2", wantAttempts: 2, wantReason: retry.ErrNotRetryable},
		{name: "attempts exhausted", steps: fail(codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable), wantCode: codes.Unavailable, wantMessage: "attempt 4", wantAttempts: 4, wantReason: retry.ErrAttemptsExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: tt.steps}
			p, _ := fastPolicy(4)
			client := setup(t, srv, retrygrpc.Config{Policy: p, Codes: tt.codes})

			err := check(t.Context(), client)

			if got, want := status.Code(err), tt.wantCode; got != want {
				t.Fatalf("status.Code = %v, want %v (err: %v)", got, want, err)
			}
			if got, want := len(srv.Keys()), tt.wantAttempts; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			if tt.wantReason == nil {
				return
			}
			if !errors.Is(err, tt.wantReason) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantReason)
			}
			// The last attempt's status reaches the caller unchanged.
			if got, want := status.Convert(err).Message(), tt.wantMessage; got != want {
				t.Errorf("status message = %q, want %q", got, want)
			}
		})
	}
}

func TestUnaryIdempotencyKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		callKey string // set by the caller; "" lets the interceptor make one
	}{
		{name: "generated once per call"},
		{name: "caller's key kept", callKey: "order-42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.ResourceExhausted}}}
			p, _ := fastPolicy(5)
			client := setup(t, srv, retrygrpc.Config{Policy: p})
			ctx := t.Context()
			if tt.callKey != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "Idempotency-Key", tt.callKey)
			}

			if err := check(ctx, client); err != nil {
				t.Fatal(err)
			}

			keys := srv.Keys()
			if got, want := len(keys), 3; got != want {
				t.Fatalf("attempts = %d, want %d", got, want)
			}
			want := tt.callKey
			if want == "" {
				want = keys[0]
				if _, err := uuid.Parse(want); err != nil {
					t.Fatalf("generated key %q is not a UUID: %v", want, err)
				}
			}
			for i, got := range keys {
				if got != want {
					t.Errorf("attempt %d key = %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

func TestUnaryIdempotencyKeyDiffersBetweenCalls(t *testing.T) {
	t.Parallel()
	srv := &healthServer{}
	client := setup(t, srv, retrygrpc.Config{})
	for range 2 {
		if err := check(t.Context(), client); err != nil {
			t.Fatal(err)
		}
	}
	keys := srv.Keys()
	if keys[0] == "" || keys[0] == keys[1] {
		t.Errorf("keys of two calls = %q, want two different keys", keys)
	}
}

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
		{name: "capped at the backoff's max", step: step{code: codes.Unavailable, pushback: []string{"5000"}}, wantAttempts: 2, wantSleeps: []time.Duration{time.Second}},
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
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: wait, Jitter: backoff.NoJitter},
		// OnRetry runs just before the wait: cancel a little into it.
		OnRetry: func(context.Context, retry.Attempt) { timer = time.AfterFunc(20*time.Millisecond, cancel) },
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

func TestUnaryHooksAndLogs(t *testing.T) {
	t.Parallel()
	const method = "/grpc.health.v1.Health/Check"
	tests := []struct {
		name     string
		name2    string // Policy.Name
		wantName string
	}{
		{name: "method by default", wantName: method},
		{name: "policy's own name", name2: "health-check", wantName: "health-check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.Unavailable}}}
			p, _ := fastPolicy(3)
			var logs bytes.Buffer
			var mu sync.Mutex
			var got []retry.Attempt
			p.Name = tt.name2
			p.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			p.OnRetry = func(_ context.Context, a retry.Attempt) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, a)
			}
			client := setup(t, srv, retrygrpc.Config{Policy: p})

			if err := check(t.Context(), client); err != nil {
				t.Fatal(err)
			}

			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 {
				t.Fatalf("OnRetry called %d times, want 2", len(got))
			}
			for i, a := range got {
				if a.Name != tt.wantName || a.Number != i+1 || status.Code(a.Err) != codes.Unavailable {
					t.Errorf("OnRetry #%d = {Name: %q, Number: %d, Err: %v}, want {%q, %d, Unavailable}", i+1, a.Name, a.Number, a.Err, tt.wantName, i+1)
				}
			}
			if want := "op=" + tt.wantName; !strings.Contains(logs.String(), want) {
				t.Errorf("logs = %q, want them to contain %q", logs.String(), want)
			}
		})
	}
}
