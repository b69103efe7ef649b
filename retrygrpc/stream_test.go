package retrygrpc_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrygrpc"
)

// watchFirst opens a Watch for "svc" and receives its first message.
func watchFirst(ctx context.Context, client healthpb.HealthClient) (grpc.ServerStreamingClient[healthpb.HealthCheckResponse], *healthpb.HealthCheckResponse, error) {
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		return nil, nil, err
	}
	resp, err := stream.Recv()
	return stream, resp, err
}

func TestWatchBeforeFirstResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		steps        []step
		wantCode     codes.Code // of the first Recv
		wantAttempts int
		wantReason   error
		wantSleeps   []time.Duration
		wantTrailer  []string // the stream's pushback trailer after a failure
	}{
		{name: "retried until a response", steps: []step{{code: codes.Unavailable}, {code: codes.ResourceExhausted}}, wantCode: codes.OK, wantAttempts: 3, wantSleeps: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		{name: "headers sent but not read", steps: []step{{code: codes.Unavailable, header: true}}, wantCode: codes.OK, wantAttempts: 2, wantSleeps: []time.Duration{10 * time.Millisecond}},
		{name: "not retryable", steps: []step{{code: codes.InvalidArgument}}, wantCode: codes.InvalidArgument, wantAttempts: 1, wantReason: retry.ErrNotRetryable},
		{name: "attempts exhausted", steps: []step{{code: codes.Unavailable}, {code: codes.Unavailable}, {code: codes.Unavailable}}, wantCode: codes.Unavailable, wantAttempts: 3, wantReason: retry.ErrAttemptsExhausted, wantSleeps: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		{name: "pushback", steps: []step{{code: codes.Unavailable, pushback: []string{"300"}}}, wantCode: codes.OK, wantAttempts: 2, wantSleeps: []time.Duration{300 * time.Millisecond}},
		{name: "negative pushback", steps: []step{{code: codes.Unavailable, pushback: []string{"-5"}}}, wantCode: codes.Unavailable, wantAttempts: 1, wantReason: retry.ErrNotRetryable, wantTrailer: []string{"-5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: tt.steps}
			p, clock := fastPolicy(3)
			client := setup(t, srv, retrygrpc.Config{Policy: p})

			stream, resp, err := watchFirst(t.Context(), client)

			if got, want := status.Code(err), tt.wantCode; got != want {
				t.Fatalf("first Recv: status.Code = %v, want %v (err: %v)", got, want, err)
			}
			if tt.wantReason != nil && !errors.Is(err, tt.wantReason) {
				t.Errorf("first Recv: err = %v, want it to wrap %v", err, tt.wantReason)
			}
			if got, want := clock.Sleeps(), tt.wantSleeps; !slices.Equal(got, want) {
				t.Errorf("sleeps = %v, want %v", got, want)
			}
			keys, services := srv.Keys(), srv.Services()
			if got, want := len(keys), tt.wantAttempts; got != want {
				t.Fatalf("attempts = %d, want %d", got, want)
			}
			for i := range keys {
				// The same request and the same key on every attempt.
				if keys[i] != keys[0] || keys[i] == "" || services[i] != "svc" {
					t.Errorf("attempt %d: key %q, service %q; want key %q, service %q", i+1, keys[i], services[i], keys[0], "svc")
				}
			}
			if err != nil {
				if got, want := stream.Trailer().Get(retrygrpc.PushbackTrailer), tt.wantTrailer; !slices.Equal(got, want) {
					t.Errorf("Trailer()[%s] = %q, want %q", retrygrpc.PushbackTrailer, got, want)
				}
				return
			}
			if got, want := resp.GetStatus(), healthpb.HealthCheckResponse_SERVING; got != want {
				t.Errorf("first response = %v, want %v", got, want)
			}
			if _, err := stream.Recv(); err != io.EOF {
				t.Errorf("second Recv: err = %v, want io.EOF", err)
			}
		})
	}
}

func TestWatchCommitted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		step       step
		readHeader bool
	}{
		{name: "after the first response", step: step{code: codes.Unavailable, sendFirst: true}},
		{name: "after the caller read the headers", step: step{code: codes.Unavailable, header: true}, readHeader: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{tt.step}}
			p, _ := fastPolicy(3)
			client := setup(t, srv, retrygrpc.Config{Policy: p})
			stream, err := client.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "svc"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.readHeader {
				md, err := stream.Header()
				if err != nil {
					t.Fatal(err)
				}
				if got, want := md.Get("attempt"), []string{"1"}; !slices.Equal(got, want) {
					t.Errorf("header attempt = %q, want %q", got, want)
				}
			}

			var err2 error
			for err2 == nil {
				_, err2 = stream.Recv()
			}

			if got, want := status.Code(err2), codes.Unavailable; got != want {
				t.Errorf("status.Code = %v, want %v (err: %v)", got, want, err2)
			}
			if got, want := len(srv.Keys()), 1; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
		})
	}
}

func TestWatchCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	const wait = time.Minute
	srv := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.Unavailable}}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := setup(t, srv, retrygrpc.Config{Policy: retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: wait, Max: backoff.None, Jitter: backoff.NoJitter},
		Observer:    retry.OnRetry(func(context.Context, retry.Event) { time.AfterFunc(20*time.Millisecond, cancel) }),
	}})
	start := time.Now()

	_, _, err := watchFirst(ctx, client)

	if elapsed := time.Since(start); elapsed >= wait {
		t.Errorf("Recv took %v: the wait of %v was not cut short", elapsed, wait)
	}
	if got, want := status.Code(err), codes.Canceled; got != want {
		t.Errorf("status.Code = %v, want %v (err: %v)", got, want, err)
	}
	if !errors.Is(err, retry.ErrCancelled) {
		t.Errorf("err = %v, want it to wrap ErrCancelled", err)
	}
	if got, want := len(srv.Keys()), 1; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
}

func TestWatchCallerDeadlineNotRetried(t *testing.T) {
	t.Parallel()
	srv := &healthServer{steps: []step{{hang: true}, {hang: true}}}
	client := setup(t, srv, retrygrpc.Config{
		Policy: retry.Policy{MaxAttempts: 3},
		Codes:  []codes.Code{codes.Unavailable, codes.DeadlineExceeded},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()

	_, _, err := watchFirst(ctx, client)

	if got, want := status.Code(err), codes.DeadlineExceeded; got != want {
		t.Errorf("status.Code = %v, want %v (err: %v)", got, want, err)
	}
	if !errors.Is(err, retry.ErrCancelled) {
		t.Errorf("err = %v, want it to wrap ErrCancelled", err)
	}
	if got, want := len(srv.Keys()), 1; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
}
