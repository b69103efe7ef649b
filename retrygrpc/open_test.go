package retrygrpc_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
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

// lateServer is a loopback address with nothing listening on it yet, and a
// policy whose first retry starts a server there: connections are refused
// until then.
type lateServer struct {
	addr    string
	retries atomic.Int32
	once    sync.Once
	err     error // from listening, once started
}

func newLateServer(t *testing.T, start func(net.Listener)) (*lateServer, retry.Policy) {
	t.Helper()
	lis := listen(t)
	s := &lateServer{addr: lis.Addr().String()}
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	p := retry.Policy{
		// Enough room for gRPC's own reconnection to find the server.
		MaxAttempts: 100,
		Budget:      10 * time.Second,
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: 20 * time.Millisecond, Jitter: backoff.NoJitter},
		Observer: retry.OnRetry(func(context.Context, retry.Event) {
			s.retries.Add(1)
			s.once.Do(func() {
				lis, err := net.Listen("tcp", s.addr)
				if err != nil {
					s.err = err
					return
				}
				start(lis)
			})
		}),
	}
	return s, p
}

func TestServerComesUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		call func(context.Context, healthpb.HealthClient) error
	}{
		{name: "unary", call: check},
		{name: "watch", call: func(ctx context.Context, client healthpb.HealthClient) error {
			_, _, err := watchFirst(ctx, client)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &healthServer{}
			late, p := newLateServer(t, func(lis net.Listener) { serve(t, lis, srv) })
			client := healthpb.NewHealthClient(dial(t, late.addr, retrygrpc.Config{Policy: p}))

			err := tt.call(t.Context(), client)

			if late.err != nil {
				t.Fatal(late.err)
			}
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if late.retries.Load() == 0 {
				t.Error("no retry: the first attempt should have found no server")
			}
			if got, want := len(srv.Keys()), 1; got != want {
				t.Errorf("attempts that reached the server = %d, want %d", got, want)
			}
		})
	}
}

// A bidirectional stream is retried while it opens, never once the caller
// holds it.
func TestBidiStreamRetriedOnlyWhileOpening(t *testing.T) {
	t.Parallel()
	var streams atomic.Int32
	chat := func(_ any, stream grpc.ServerStream) error {
		streams.Add(1)
		if err := stream.RecvMsg(new(healthpb.HealthCheckRequest)); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "after the first message")
	}
	late, p := newLateServer(t, func(lis net.Listener) {
		gs := grpc.NewServer(grpc.UnknownServiceHandler(chat))
		go func() { _ = gs.Serve(lis) }()
		t.Cleanup(gs.Stop)
	})
	conn := dial(t, late.addr, retrygrpc.Config{Policy: p})
	desc := &grpc.StreamDesc{StreamName: "Chat", ClientStreams: true, ServerStreams: true}

	stream, err := conn.NewStream(t.Context(), desc, "/test.Chat/Chat")

	if late.err != nil {
		t.Fatal(late.err)
	}
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	retries := late.retries.Load()
	if retries == 0 {
		t.Error("no retry: opening the stream should have found no server at first")
	}
	if err := stream.SendMsg(&healthpb.HealthCheckRequest{Service: "svc"}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	err = stream.RecvMsg(new(healthpb.HealthCheckResponse))
	if got, want := status.Code(err), codes.Unavailable; got != want {
		t.Errorf("RecvMsg: status.Code = %v, want %v (err: %v)", got, want, err)
	}
	if got, want := streams.Load(), int32(1); got != want {
		t.Errorf("streams that reached the server = %d, want %d", got, want)
	}
	if got := late.retries.Load(); got != retries {
		t.Errorf("retries after the stream was returned = %d, want 0", got-retries)
	}
}
