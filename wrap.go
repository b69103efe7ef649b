package retry

import "context"

// PolicyCarrier is implemented by request types that bring their own retry
// policy to Wrap. ok false means "use the wrapper's default".
type PolicyCarrier interface {
	RetryPolicy() (p Policy, ok bool)
}

// Wrap returns a handler that calls next with retries: middleware for any
// pipeline of func(ctx, Req) (Resp, error). A request that implements
// PolicyCarrier is retried by its own policy, any other by p.
func Wrap[Req, Resp any](p Policy, next func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		policy := p
		if c, ok := any(req).(PolicyCarrier); ok {
			if own, ok := c.RetryPolicy(); ok {
				policy = own
			}
		}
		return DoValue(ctx, policy, func(ctx context.Context) (Resp, error) { return next(ctx, req) })
	}
}
