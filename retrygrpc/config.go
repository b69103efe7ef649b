package retrygrpc

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
)

// IdempotencyKeyMetadata is the outgoing metadata key that carries the
// idempotency key on every attempt.
const IdempotencyKeyMetadata = "idempotency-key"

// ErrAttemptTimeout is wrapped by the error of an attempt that Config's
// AttemptTimeout cut short, so that it can be told apart from the caller's own
// deadline (which is never retried).
var ErrAttemptTimeout = errors.New("retrygrpc: attempt timed out")

// DefaultCodes returns the status codes retried when Config.Codes is nil:
// UNAVAILABLE and RESOURCE_EXHAUSTED. Each call returns a new slice.
func DefaultCodes() []codes.Code { return []codes.Code{codes.Unavailable, codes.ResourceExhausted} }

// Config sets up the interceptors. The zero Config is usable: the zero
// retry.Policy (retry.DefaultMaxAttempts attempts, backoff.Default delays, no
// budget), DefaultCodes, no per-attempt timeout. A Config is copied by the
// constructors; the interceptors they return are safe for concurrent use.
type Config struct {
	// Policy drives the retries: attempts, budget, delays, quota, hooks,
	// logging, clock. An empty Name becomes the call's full method name.
	// RetryableStatusCodes (HTTP statuses) plays no part here.
	Policy retry.Policy
	// Codes lists the status codes worth retrying; nil means DefaultCodes,
	// an empty non-nil slice means none. OK is never retried, and neither
	// is the caller's own cancellation or deadline, whatever is listed.
	Codes []codes.Code
	// AttemptTimeout bounds each attempt of a unary call; 0 or less means
	// no bound but the caller's. An attempt that runs out of it is retried
	// (that is what it is for) and its error wraps ErrAttemptTimeout. It
	// uses the real clock, not Policy.Clock. Streams ignore it.
	AttemptTimeout time.Duration
	// Limiters, when set, gives each target (the ClientConn's Target()) a
	// retry.Limiter of its own: every attempt waits for its target's
	// limiter, and the target's UNAVAILABLE and RESOURCE_EXHAUSTED answers
	// slow down every call to it (see retry.Limiter). nil means no limiter,
	// unless Policy.Limiter is set: that one is shared by every target, and
	// wins.
	Limiters *retry.Limiters
}

// policy returns the policy of a call of method on cc.
func (c *Config) policy(method string, cc *grpc.ClientConn) retry.Policy {
	p := c.Policy
	if p.Name == "" {
		p.Name = method
	}
	if p.Limiter == nil && c.Limiters != nil && cc != nil {
		p.Limiter = c.Limiters.Get(cc.Target())
	}
	return p
}

func (c *Config) retryable(code codes.Code) bool {
	if code == codes.OK {
		return false
	}
	if c.Codes == nil { // DefaultCodes, without making the slice
		return code == codes.Unavailable || code == codes.ResourceExhausted
	}
	return slices.Contains(c.Codes, code)
}

// attemptFailed turns the error of one attempt into what the retry engine
// classifies: it says whether the code is retryable and carries the pushback
// of the attempt's trailer. timeout > 0 means AttemptTimeout ended the attempt.
func (c *Config) attemptFailed(err error, trailer metadata.MD, timeout time.Duration) error {
	st, _ := status.FromError(err)
	e := &attemptError{err: err, st: st, pushback: -1, timeout: timeout}
	e.retry = timeout > 0 || c.retryable(st.Code())
	switch d, state := pushback(trailer); state {
	case pushbackStop:
		return retry.Permanent(e)
	case pushbackWait:
		e.pushback = d
	}
	return e
}

// attemptError is one failed attempt as the retry engine sees it: it
// classifies itself (Retryable) and carries the server's pushback
// (RetryAfter), while status.Code and errors.Is still reach the call's error.
type attemptError struct {
	err      error
	st       *status.Status
	retry    bool
	pushback time.Duration // negative: none
	timeout  time.Duration // > 0: AttemptTimeout ended the attempt
}

func (e *attemptError) Error() string {
	if e.timeout > 0 {
		return "attempt timed out after " + e.timeout.String() + ": " + e.err.Error()
	}
	return e.err.Error()
}

func (e *attemptError) Unwrap() []error {
	if e.timeout > 0 {
		return []error{ErrAttemptTimeout, e.err}
	}
	return []error{e.err}
}

func (e *attemptError) Retryable() bool            { return e.retry }
func (e *attemptError) RetryAfter() time.Duration  { return e.pushback }
func (e *attemptError) GRPCStatus() *status.Status { return e.st }

// RPCStatusCode returns the attempt's status code by its name in the gRPC
// specification ("UNAVAILABLE"): what Policy.Observer reads to tell the
// code without importing gRPC, as it reads an HTTP status through
// HTTPStatusCode (retryotel puts it on the attempt's span).
func (e *attemptError) RPCStatusCode() string { return codeName(e.st.Code()) }

// codeName returns c's name in the gRPC specification (statuscodes.md);
// codes.Code's String is "Unavailable", not the specification's
// "UNAVAILABLE" that OpenTelemetry's conventions use.
func codeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	case codes.Unknown:
		return "UNKNOWN"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.NotFound:
		return "NOT_FOUND"
	case codes.AlreadyExists:
		return "ALREADY_EXISTS"
	case codes.PermissionDenied:
		return "PERMISSION_DENIED"
	case codes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case codes.FailedPrecondition:
		return "FAILED_PRECONDITION"
	case codes.Aborted:
		return "ABORTED"
	case codes.OutOfRange:
		return "OUT_OF_RANGE"
	case codes.Unimplemented:
		return "UNIMPLEMENTED"
	case codes.Internal:
		return "INTERNAL"
	case codes.Unavailable:
		return "UNAVAILABLE"
	case codes.DataLoss:
		return "DATA_LOSS"
	case codes.Unauthenticated:
		return "UNAUTHENTICATED"
	}
	return strconv.FormatUint(uint64(c), 10)
}

// callError is what an interceptor returns when it gives up. Its status is
// given directly (not found through Unwrap), so status.FromError returns it
// unchanged rather than rewriting its message to the whole error text.
type callError struct {
	st  *status.Status
	err error // the *retry.Error
}

func (e *callError) Error() string              { return e.err.Error() }
func (e *callError) Unwrap() error              { return e.err }
func (e *callError) GRPCStatus() *status.Status { return e.st }

// gaveUp wraps the engine's error for the caller of an RPC made under ctx.
func gaveUp(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, retry.ErrCancelled) {
		return &callError{st: status.FromContextError(ctx.Err()), err: err}
	}
	var ae *attemptError
	if errors.As(err, &ae) {
		return &callError{st: ae.st, err: err}
	}
	return &callError{st: status.Convert(err), err: err}
}

// awaitPassedDeadline returns once ctx is done if its deadline has passed by
// the clock, at once otherwise. A server sees the same deadline (gRPC sends
// it along) and may report it before this process's timer has fired; waiting
// for that timer, which is due, lets ctx.Err() say whose deadline it was, so
// that the caller's own is never taken for an attempt's and retried.
func awaitPassedDeadline(ctx context.Context) {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		<-ctx.Done()
	}
}

// withIdempotencyKey returns ctx with an idempotency key in its outgoing
// metadata: the caller's, when there is one, else a new random UUID.
func withIdempotencyKey(ctx context.Context) context.Context {
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md[IdempotencyKeyMetadata]) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, IdempotencyKeyMetadata, retry.NewIdempotencyKey())
}
