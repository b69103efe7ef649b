package retrygrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrygrpc"
)

// warmingUp is a Health service that answers its first two calls with
// status fail, then SERVING, and prints the idempotency key of each call.
type warmingUp struct {
	healthpb.UnimplementedHealthServer
	fail      codes.Code
	printKeys bool
	calls     atomic.Int32
}

func (s *warmingUp) answer(ctx context.Context) error {
	if s.printKeys {
		md, _ := metadata.FromIncomingContext(ctx)
		fmt.Println("server got idempotency-key", md.Get("idempotency-key"))
	}
	if s.calls.Add(1) <= 2 {
		return status.Error(s.fail, "warming up")
	}
	return nil
}

func (s *warmingUp) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := s.answer(ctx); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *warmingUp) Watch(_ *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if err := s.answer(stream.Context()); err != nil {
		return err
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// startServer serves srv on a loopback port.
func startServer(srv healthpb.HealthServer) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	return lis.Addr().String(), gs.Stop, nil
}

func ExampleUnaryClientInterceptor() {
	addr, stop, err := startServer(&warmingUp{fail: codes.Unavailable})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	policy := retry.Policy{
		MaxAttempts: 4,
		Budget:      5 * time.Second,
		Backoff:     backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second},
		Observer: retry.OnRetry(func(_ context.Context, a retry.Event) {
			fmt.Printf("%s: attempt %d failed: %v\n", a.Name, a.Attempt, status.Code(a.Err))
		}),
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retrygrpc.Config{Policy: policy})))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(status.Code(err), err)
		return
	}
	fmt.Println(resp.GetStatus())
	// Output:
	// /grpc.health.v1.Health/Check: attempt 1 failed: Unavailable
	// /grpc.health.v1.Health/Check: attempt 2 failed: Unavailable
	// SERVING
}

// ABORTED is retried only when listed. The caller's own idempotency key goes
// on every attempt.
func ExampleConfig() {
	addr, stop, err := startServer(&warmingUp{fail: codes.Aborted, printKeys: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	config := retrygrpc.Config{
		Policy:         retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Base: 10 * time.Millisecond}},
		Codes:          []codes.Code{codes.Unavailable, codes.Aborted},
		AttemptTimeout: 2 * time.Second,
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(config)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", "order-42")
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(status.Code(err), err)
		return
	}
	fmt.Println(resp.GetStatus())
	// Output:
	// server got idempotency-key [order-42]
	// server got idempotency-key [order-42]
	// server got idempotency-key [order-42]
	// SERVING
}

// A server-streaming call is retried until its first response arrives.
func ExampleStreamClientInterceptor() {
	addr, stop, err := startServer(&warmingUp{fail: codes.ResourceExhausted})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	config := retrygrpc.Config{Policy: retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Base: 10 * time.Millisecond}}}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(config)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	stream, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := stream.Recv()
	if err != nil {
		fmt.Println(status.Code(err), err)
		return
	}
	fmt.Println(resp.GetStatus())
	// Output:
	// SERVING
}

func ExampleParsePushback() {
	for _, v := range []string{"250", "0", "-1", "soon"} {
		d, ok := retrygrpc.ParsePushback(v)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "250": 250ms true
	// "0": 0s true
	// "-1": 0s false
	// "soon": 0s false
}
