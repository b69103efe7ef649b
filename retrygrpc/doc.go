// Package retrygrpc retries gRPC client calls with the retry engine of package
// retry: client interceptors that classify status codes, carry one
// idempotency key on every attempt, and honour the server's
// grpc-retry-pushback-ms trailer.
//
//	conn, err := grpc.NewClient(addr, creds,
//		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(retrygrpc.Config{})),
//		grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(retrygrpc.Config{})))
//
// What is retried: the status codes in Config.Codes (by default UNAVAILABLE
// and RESOURCE_EXHAUSTED; add DEADLINE_EXCEEDED or ABORTED to opt in), and an
// attempt cut short by Config.AttemptTimeout. The caller's own cancellation or
// deadline is never retried: package retry checks the caller's context before
// anything else, and an attempt that ran out of its own AttemptTimeout is told
// apart from one that ran out of the caller's deadline (it wraps
// ErrAttemptTimeout). A Policy.Classifier, when set, is asked first and may
// override the codes.
//
// Idempotency: every attempt of one call carries the same "idempotency-key"
// outgoing metadata. The caller's own key is kept when its outgoing metadata
// has one; otherwise a random UUID is made once per call, before the first
// attempt, and never regenerated.
//
// Pushback: a grpc-retry-pushback-ms trailer of N milliseconds on a retryable
// failure makes the next wait at least N ms (capped by the backoff's Max, and
// the call stops at once if the wait does not fit Policy.Budget), as
// Retry-After does for HTTP. As gRFC A6 says, a negative or malformed value
// (or several values) is the server asking the client not to retry: the call
// stops with that attempt's error, whatever the codes or the Classifier say.
// A6 makes pushback replace the backoff delay; here it is a floor under it, so
// that one engine treats HTTP and gRPC hints alike.
//
// Errors: when the interceptors give up they return an error whose
// GRPCStatus is the last attempt's status, unchanged (code, message, details),
// or CANCELED / DEADLINE_EXCEEDED when the caller's context ended the call,
// so status.FromError and status.Code work as without retries. The same
// error wraps the *retry.Error, so errors.Is(err, retry.ErrAttemptsExhausted)
// and errors.As(err, &retryErr) say why it stopped.
//
// Streams: a stream is retried only while retrying cannot be seen by the
// caller or the server's logic.
//
//   - Any stream: opening it (the streamer returning an error) is retried,
//     since nothing has been sent yet. For client-streaming and bidirectional
//     calls that is all: once the caller holds the stream, it sends messages
//     whose timing and content may depend on what it received, and replaying
//     them on a new stream could not be made to match what it already saw.
//   - A call with a single request (server-streaming): besides opening, a
//     failure that arrives before any response is retried by opening a new
//     stream and sending the same request again, as long as the caller sent
//     exactly one message and closed its side before that failure. The first
//     response message (or the server's headers, read with Header) commits the
//     stream: after that every error goes to the caller as it is. An error in
//     opening such a stream is reported by the first RecvMsg, where gRPC
//     reports the other errors of these calls, so that one execution (one
//     attempt count, one budget) covers both.
//
// AttemptTimeout applies to unary calls only: a stream may rightly live for
// hours, and a deadline on each attempt would end it.
//
// Hooks and logs are the Policy's (Observer, Logger); Policy.Name, when empty,
// becomes the full method name ("/pkg.Service/Method"). The error of a failed
// attempt, as an Observer hears it, names its status code with a method
// RPCStatusCode() string ("UNAVAILABLE", as the gRPC specification spells
// it), so that an observer (package retryotel) reads it without importing
// gRPC. The same method tells a retry.Limiter an overload: with
// Config.Limiters set, each target (ClientConn.Target) has a limiter of its
// own, slowed down by its UNAVAILABLE, RESOURCE_EXHAUSTED and
// DEADLINE_EXCEEDED answers (see retry.Limiter).
package retrygrpc
