package retrygrpc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
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
				if !uuidV4.MatchString(want) {
					t.Fatalf("generated key %q is not a version 4 UUID", want)
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

func TestUnaryHooksAndLogs(t *testing.T) {
	t.Parallel()
	const method = "/grpc.health.v1.Health/Check"
	tests := []struct {
		name       string
		policyName string // Policy.Name
		wantName   string
	}{
		{name: "method by default", wantName: method},
		{name: "policy's own name", policyName: "health-check", wantName: "health-check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{{code: codes.Unavailable}, {code: codes.Unavailable}}}
			p, _ := fastPolicy(3)
			var logs bytes.Buffer
			var mu sync.Mutex
			var got []retry.Event
			p.Name = tt.policyName
			p.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			p.Observer = retry.OnRetry(func(_ context.Context, a retry.Event) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, a)
			})
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
				if a.Name != tt.wantName || a.Attempt != i+1 || status.Code(a.Err) != codes.Unavailable {
					t.Errorf("OnRetry #%d = {Name: %q, Number: %d, Err: %v}, want {%q, %d, Unavailable}", i+1, a.Name, a.Attempt, a.Err, tt.wantName, i+1)
				}
				// The code by name, for observers that do not import gRPC.
				var named interface{ RPCStatusCode() string }
				if !errors.As(a.Err, &named) || named.RPCStatusCode() != "UNAVAILABLE" {
					t.Errorf("OnRetry #%d: error %v does not name its code UNAVAILABLE", i+1, a.Err)
				}
			}
			if want := "op=" + tt.wantName; !strings.Contains(logs.String(), want) {
				t.Errorf("logs = %q, want them to contain %q", logs.String(), want)
			}
		})
	}
}

func TestUnaryClassifierFirst(t *testing.T) {
	t.Parallel()
	byCode := func(c codes.Code, d retry.Decision) retry.Classifier {
		return retry.ClassifierFunc(func(err error) retry.Decision {
			if status.Code(err) == c {
				return d
			}
			return retry.Unknown
		})
	}
	tests := []struct {
		name         string
		classifier   retry.Classifier
		step         step
		wantAttempts int
	}{
		{name: "retries a code not listed", classifier: byCode(codes.InvalidArgument, retry.Retry), step: step{code: codes.InvalidArgument}, wantAttempts: 2},
		{name: "refuses a listed code", classifier: byCode(codes.Unavailable, retry.NoRetry), step: step{code: codes.Unavailable}, wantAttempts: 1},
		{name: "leaves the rest to the codes", classifier: byCode(codes.InvalidArgument, retry.Retry), step: step{code: codes.Unavailable}, wantAttempts: 2},
		{name: "cannot override a pushback that says stop", classifier: byCode(codes.Unavailable, retry.Retry), step: step{code: codes.Unavailable, pushback: []string{"-1"}}, wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{steps: []step{tt.step}}
			p, _ := fastPolicy(3)
			p.Classifier = tt.classifier
			client := setup(t, srv, retrygrpc.Config{Policy: p})

			err := check(t.Context(), client)

			if got, want := len(srv.Keys()), tt.wantAttempts; got != want {
				t.Errorf("attempts = %d, want %d (err: %v)", got, want, err)
			}
			if wantOK := tt.wantAttempts == 2; (err == nil) != wantOK {
				t.Errorf("err = %v, want success %v", err, wantOK)
			}
		})
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
