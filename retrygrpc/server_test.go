package retrygrpc_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	gbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retrytest"
)

// step scripts one attempt of a call on healthServer.
type step struct {
	code      codes.Code // OK: succeed
	pushback  []string   // values of the grpc-retry-pushback-ms trailer
	hang      bool       // wait until the call's context ends
	header    bool       // Watch: send headers before anything else
	sendFirst bool       // Watch: send one response before failing
}

// healthServer is a real Health service that plays its steps, one per
// attempt (then succeeds), and records what each attempt brought.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	steps []step

	mu       sync.Mutex
	keys     []string // the idempotency-key metadata of each attempt, values joined by ","
	services []string // the request's service name of each attempt
}

func (s *healthServer) attempt(ctx context.Context, req *healthpb.HealthCheckRequest) (int, step) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.keys)
	s.keys = append(s.keys, strings.Join(md.Get(retrygrpc.IdempotencyKeyMetadata), ","))
	s.services = append(s.services, req.GetService())
	if n < len(s.steps) {
		return n + 1, s.steps[n]
	}
	return n + 1, step{}
}

// Keys returns the idempotency key that each attempt carried.
func (s *healthServer) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// Services returns the service name that each attempt asked about.
func (s *healthServer) Services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.services...)
}

func (s *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	n, st := s.attempt(ctx, req)
	if st.hang {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if len(st.pushback) > 0 {
		if err := grpc.SetTrailer(ctx, metadata.MD{retrygrpc.PushbackTrailer: st.pushback}); err != nil {
			return nil, err
		}
	}
	if st.code != codes.OK {
		return nil, status.Error(st.code, "attempt "+strconv.Itoa(n))
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	n, st := s.attempt(stream.Context(), req)
	serving := &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	if st.header {
		if err := stream.SendHeader(metadata.Pairs("attempt", strconv.Itoa(n))); err != nil {
			return err
		}
	}
	if st.hang {
		<-stream.Context().Done()
		return status.FromContextError(stream.Context().Err()).Err()
	}
	if st.sendFirst {
		if err := stream.Send(serving); err != nil {
			return err
		}
	}
	if len(st.pushback) > 0 {
		stream.SetTrailer(metadata.MD{retrygrpc.PushbackTrailer: st.pushback})
	}
	if st.code != codes.OK {
		return status.Error(st.code, "attempt "+strconv.Itoa(n))
	}
	return stream.Send(serving)
}

// serve runs srv on lis until the test ends.
func serve(t testing.TB, lis net.Listener, srv *healthServer, opts ...grpc.ServerOption) {
	t.Helper()
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
}

// listen returns a listener on a free loopback port.
func listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// dial connects to addr through both interceptors made from c. gRPC's own
// reconnection backoff is made short so that a server that comes up late is
// found quickly.
func dial(t *testing.T, addr string, c retrygrpc.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           gbackoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.2, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(c)),
		grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(c)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// setup serves srv on a loopback port and returns a client that goes
// through interceptors made from c.
func setup(t *testing.T, srv *healthServer, c retrygrpc.Config) healthpb.HealthClient {
	t.Helper()
	lis := listen(t)
	serve(t, lis, srv)
	return healthpb.NewHealthClient(dial(t, lis.Addr().String(), c))
}

// fastPolicy retries up to attempts times with exact, jitter-free delays of
// 10ms, 20ms, 40ms… capped at 1s, slept on a fake clock.
func fastPolicy(attempts int) (retry.Policy, *retrytest.Clock) {
	clock := retrytest.NewClock(time.Now())
	return retry.Policy{
		MaxAttempts: attempts,
		Backoff:     backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.NoJitter},
		Clock:       clock,
	}, clock
}
