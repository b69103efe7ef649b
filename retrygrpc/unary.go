package retrygrpc

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
)

// UnaryClientInterceptor returns an interceptor that retries unary calls as
// c says (see the package documentation for what is retried). Each attempt
// carries the same idempotency key and, when c.AttemptTimeout is set, its
// own deadline. On success it returns nil; on giving up, an error whose
// GRPCStatus is the last attempt's (or the caller's context's) and which
// wraps the *retry.Error. The interceptor is safe for concurrent use.
func UnaryClientInterceptor(c Config) grpc.UnaryClientInterceptor {
	c.Codes = cloneCodes(c.Codes)
	if c.Policy.Observer != nil {
		c.Policy.Observer = okObserver{c.Policy.Observer}
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = withIdempotencyKey(ctx)
		var trailer metadata.MD
		// The full slice expression makes append copy, so the caller's
		// options are never written to.
		opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))
		err := retry.Do(ctx, c.policy(method, cc), func(ctx context.Context) error {
			trailer = nil
			actx, cancel := ctx, context.CancelFunc(func() {})
			if c.AttemptTimeout > 0 {
				actx, cancel = context.WithTimeout(ctx, c.AttemptTimeout)
			}
			defer cancel()
			err := invoker(actx, method, req, reply, cc, opts...)
			if err == nil {
				return nil
			}
			return c.attemptFailed(err, trailer, c.timedOut(ctx, actx, err))
		})
		if err != nil {
			return gaveUp(ctx, err)
		}
		return nil
	}
}

// timedOut returns c.AttemptTimeout if it, not the caller's deadline nor
// the server, ended the attempt made under actx (a child of ctx) with err;
// else 0. The caller's context is settled first, so that package retry sees
// the caller's own deadline as such.
func (c *Config) timedOut(ctx, actx context.Context, err error) time.Duration {
	awaitPassedDeadline(ctx)
	if c.AttemptTimeout <= 0 || ctx.Err() != nil || status.Code(err) != codes.DeadlineExceeded {
		return 0
	}
	awaitPassedDeadline(actx)
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return c.AttemptTimeout
	}
	return 0
}

func cloneCodes(cs []codes.Code) []codes.Code {
	if cs == nil {
		return nil
	}
	return append([]codes.Code{}, cs...)
}

// okObserver passes a unary call's events on to next, telling it of each
// successful attempt that its code was OK (Event.Result), as an attempt's
// error tells it a failure's (RPCStatusCode).
type okObserver struct{ next retry.Observer }

func (o okObserver) Observe(ctx context.Context, e retry.Event) {
	if e.Outcome == retry.Succeeded {
		e.Result = okStatus{}
	}
	o.next.Observe(ctx, e)
}

// okStatus is the Event.Result of a successful unary attempt.
type okStatus struct{}

// RPCStatusCode returns "OK".
func (okStatus) RPCStatusCode() string { return codeName(codes.OK) }
