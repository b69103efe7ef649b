package retryotel_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retryhttp"
	"github.com/retrykit/retry/retryotel"
)

// fastPolicy has exact delays of 1ms, then 2ms, on the real clock: the
// spans have the attempts' real durations.
func fastPolicy(obs retry.Observer) retry.Policy {
	return retry.Policy{MaxAttempts: 3, Observer: obs,
		Backoff: backoff.Policy{Base: time.Millisecond, Jitter: backoff.NoJitter}}
}

// TestRetryHTTP: a server on 127.0.0.1 answers 503, 503, then 200; a
// request through retryhttp under the caller's span makes three attempt
// spans, children of it, the failed ones with the status they got.
func TestRetryHTTP(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)

	h := setup(t, retryotel.Config{Name: "orders-api"}) // retryhttp's Policy has no Name
	client := &http.Client{Transport: &retryhttp.Transport{Base: srv.Client().Transport, Policy: fastPolicy(h.obs)}}
	ctx, caller := h.caller(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/orders/42", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	caller.End()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}

	want := []string{
		"error.type=503 http.response.status_code=503 retry.attempt=1 retry.delay=0.001 retry.max_attempts=3 retry.outcome=retrying retry.policy.name=orders-api",
		"error.type=503 http.response.status_code=503 retry.attempt=2 retry.delay=0.002 retry.max_attempts=3 retry.outcome=retrying retry.policy.name=orders-api",
		// A success returns no error to the engine; retryhttp tells the
		// observer its status through Event.Result.
		"http.response.status_code=200 retry.attempt=3 retry.max_attempts=3 retry.outcome=succeeded retry.policy.name=orders-api",
	}
	checkSpans(t, h, caller, want)
}

// TestRetryHTTPFinalError: a 404 is no failure to the retry engine (it is
// not retried) but an error to an HTTP client span: the one attempt span
// says so, with the status code as error.type.
func TestRetryHTTPFinalError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	h := setup(t, retryotel.Config{Name: "orders-api"})
	client := &http.Client{Transport: &retryhttp.Transport{Base: srv.Client().Transport, Policy: fastPolicy(h.obs)}}
	ctx, caller := h.caller(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/orders/404", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	caller.End()
	spans := h.attempts(t, caller)
	if len(spans) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(spans))
	}
	const want = "error.type=404 http.response.status_code=404 retry.attempt=1 retry.max_attempts=3 retry.outcome=succeeded retry.policy.name=orders-api"
	if got := attrs(spans[0].Attributes); got != want || spans[0].Status.Code != codes.Error {
		t.Errorf("attempt span: attributes\n\t%s\nstatus %v; want\n\t%s\nstatus Error", got, spans[0].Status.Code, want)
	}
}

// TestRetryGRPC: a real gRPC server on 127.0.0.1 answers UNAVAILABLE twice,
// then OK; a call through retrygrpc's interceptor under the caller's span
// makes three attempt spans, children of it, the failed ones with their
// gRPC status code.
func TestRetryGRPC(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, &flakyHealth{failures: 2})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	h := setup(t, retryotel.Config{})
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retrygrpc.Config{Policy: fastPolicy(h.obs)})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	ctx, caller := h.caller(t)
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}

	const method = "retry.policy.name=/grpc.health.v1.Health/Check" // retrygrpc names the Policy after the method
	want := []string{
		"error.type=UNAVAILABLE retry.attempt=1 retry.delay=0.001 retry.max_attempts=3 retry.outcome=retrying " + method + " rpc.response.status_code=UNAVAILABLE",
		"error.type=UNAVAILABLE retry.attempt=2 retry.delay=0.002 retry.max_attempts=3 retry.outcome=retrying " + method + " rpc.response.status_code=UNAVAILABLE",
		"retry.attempt=3 retry.max_attempts=3 retry.outcome=succeeded " + method + " rpc.response.status_code=OK",
	}
	checkSpans(t, h, caller, want)
}

// checkSpans checks the attempt spans under caller: their attributes, in
// order; an error status on all but the last; times in order.
func checkSpans(t *testing.T, h *harness, caller trace.Span, want []string) {
	t.Helper()
	spans := h.attempts(t, caller)
	if len(spans) != len(want) {
		t.Fatalf("%d attempt spans, want %d", len(spans), len(want))
	}
	for i, s := range spans {
		if got := attrs(s.Attributes); got != want[i] {
			t.Errorf("attempt %d: attributes\n\t%s\nwant\n\t%s", i+1, got, want[i])
		}
		wantStatus := codes.Error
		if i == len(spans)-1 {
			wantStatus = codes.Unset
		}
		if s.Status.Code != wantStatus {
			t.Errorf("attempt %d: status %v, want %v", i+1, s.Status.Code, wantStatus)
		}
		if !s.EndTime.After(s.StartTime) || i > 0 && s.StartTime.Before(spans[i-1].EndTime) {
			t.Errorf("attempt %d: from %v to %v, after an attempt that ended at %v", i+1, s.StartTime, s.EndTime, spans[max(i-1, 0)].EndTime)
		}
	}
}

// flakyHealth is a Health service that answers UNAVAILABLE to its first
// failures calls, then SERVING.
type flakyHealth struct {
	healthpb.UnimplementedHealthServer
	failures int32
	calls    atomic.Int32
}

func (s *flakyHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if n := s.calls.Add(1); n <= s.failures {
		return nil, status.Error(grpccodes.Unavailable, "call "+strconv.Itoa(int(n)))
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}
