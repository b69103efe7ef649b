// Package retryotel reports the attempts of package retry to OpenTelemetry:
// a span per attempt and a few metrics, from the hook every executor of a
// retry.Policy already calls, Policy.Observer.
//
//	obs, err := retryotel.NewObserver(retryotel.Config{})
//	if err != nil {
//		return err
//	}
//	p := retry.Policy{Name: "charge", Observer: obs}
//	err = retry.Do(ctx, p, charge) // one "retry.attempt" span per call of charge, children of ctx's span
//
// The same Observer serves every executor that runs a Policy's hooks:
// retry.Do and its variants, retryhttp's Transport, retrygrpc's interceptors
// (set it on their Policy) and kafkaretry's Processor. It is safe for
// concurrent use, so one Observer may serve many policies.
//
// # Spans
//
// Each attempt becomes a span named "retry.attempt" (SpanName), a child of
// the span in the context given to the executor (the ctx of retry.Do, the
// request's context for retryhttp, the call's for retrygrpc). An Observer
// hears of an attempt once it has ended, so the span is made after the fact,
// with the attempt's own start and end times (retry.Event's Start and
// Duration, on the Policy's clock; an executor that does not fill in Start
// gets the span ended when the event is heard). Attributes:
//
//   - retry.attempt: the attempt's number, 1 for the first call;
//     retry.max_attempts: the cap on attempts;
//   - retry.outcome: "succeeded", "retrying" or "gave_up";
//   - retry.delay: the wait before the next attempt, in seconds, when
//     another follows;
//   - retry.stop_reason: why the execution stops ("attempts_exhausted",
//     "budget_exhausted", "not_retryable", "quota_exhausted", "cancelled")
//     on the last attempt's span;
//   - retry.policy.name: Policy.Name, or Config.Name when it has none;
//   - a failed attempt has status Error with its error recorded as an
//     exception event, and error.type (see below);
//   - http.response.status_code for an error with an HTTP status
//     (HTTPStatusCode() int, as retryhttp's StatusError has), and
//     rpc.response.status_code for one with an RPC status code
//     (RPCStatusCode() string, as retrygrpc's attempts have: "UNAVAILABLE");
//     for a successful attempt, the same from retry.Event.Result, which
//     retryhttp fills with the response's status and retrygrpc's unary
//     calls with "OK". A response the engine took as final with a status
//     of 400 or more (a 404, not retried) is an error to an HTTP client
//     span: status Error, and error.type the code.
//
// The response itself is the caller's, and so is the instrumentation of it
// (otelhttp, otelgrpc), whose spans are siblings of the attempt spans.
//
// When an execution stops with no attempt of its own to report it — the
// context had ended before the first call, or ended during a wait — the
// span of the caller's context gets a "retry.give_up" event with
// retry.stop_reason instead.
//
// # Metrics
//
// Instruments, named by OpenTelemetry's conventions (dotted names, units in
// UCUM, seconds for time), each with retry.policy.name when there is a
// name:
//
//   - retry.attempts (counter, {attempt}): attempts, by retry.outcome, and
//     by error.type for failed ones;
//   - retry.retries (counter, {retry}): failed attempts followed by another,
//     by error.type;
//   - retry.give_ups (counter, {execution}): executions that stopped without
//     success, by retry.stop_reason and the last attempt's error.type;
//   - retry.delay (histogram, s): the waits before retries;
//   - retry.attempts_per_success (histogram, {attempt}): the attempts an
//     execution that succeeded took, the first included.
//
// error.type is the status code for an error that carries one (the HTTP
// status, "503"; the RPC code, "UNAVAILABLE"), else what OpenTelemetry's
// semconv.ErrorType makes of the error: its ErrorType() string method, or
// its type's name.
package retryotel
