package retrygrpc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/retrykit/retry/retrygrpc"
)

// serving answers every Check with SERVING and records nothing, so that a
// benchmark measures the call alone.
type serving struct {
	healthpb.UnimplementedHealthServer
}

func (serving) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// BenchmarkUnaryCheck measures a successful unary call over loopback, bare
// and through UnaryClientInterceptor (zero Config), to show the
// interceptor's cost per call: the idempotency key (a UUID), the trailer
// option and the retry execution.
func BenchmarkUnaryCheck(b *testing.B) {
	lis := listen(b)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, serving{})
	go func() { _ = gs.Serve(lis) }()
	b.Cleanup(gs.Stop)

	for _, bc := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{name: "bare"},
		{name: "retrygrpc", opts: []grpc.DialOption{grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retrygrpc.Config{}))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, bc.opts...)
			conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			client := healthpb.NewHealthClient(conn)
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{}
			if _, err := client.Check(ctx, req); err != nil { // connect outside the loop
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
