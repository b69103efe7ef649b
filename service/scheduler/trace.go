package scheduler

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

// tracerName names the scheduler's spans' instrumentation scope.
const tracerName = "github.com/retrykit/retry/service/scheduler"

// What the spans cost decides their shape (retryd bench --otlp-sink). An
// attempt is one span, from just before its request is sent to the end of
// its answer, in its task's trace, ended by the worker that made it. The
// claim and the finish are store calls shared by many attempts (group
// commit): each is one span of its own, in a trace of its own, saying how
// many it carried. A child span per attempt for each, with the attempt's
// span held open until its outcome was recorded, tripled the spans, put
// their ends on the commit goroutine that every outcome waits on, and cost
// the loop about half of its attempts per second. Links from the store
// spans to the attempts' were dropped too: they cost the loop about 4 % of
// its attempts per second (two links an attempt, each kept, copied and
// encoded), the SDK keeps at most 128 a span anyway, and no trace viewer
// leads from an attempt to the spans that link to it.

// attemptStart holds the start options of an attempt's span, made once
// rather than for every attempt: it is a client span, and a root of its
// task's trace when the task had no caller.
type attemptStart struct {
	child, root []trace.SpanStartOption
}

func newAttemptStart() attemptStart {
	return attemptStart{
		child: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
		root:  []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithNewRoot()},
	}
}

// startAttempt returns the trace context t's attempt carries to its target
// and, with a tracer, the attempt's span, started now. The IDs are the
// task's (package tracing), so the span the target sees as its parent is
// the one exported, and the one the attempt log names, whichever process
// makes the attempt. Without a tracer this is a header lookup and a hash,
// and no allocation: the hot path stays as it was.
func (s *Scheduler) startAttempt(t *store.Task) (dispatch.Trace, trace.Span) {
	tt := tracing.Of(t.ID, t.Headers)
	sid := tracing.AttemptSpanID(t.ID, t.AttemptNumber, t.BudgetStart)
	tr := dispatch.Trace{TraceID: tt.TraceID, SpanID: sid, Flags: byte(tt.Flags)}
	if s.tracer == nil {
		return tr, nil
	}
	ctx := context.Background() // a span outlives no context; the attempt's is not needed
	opts := s.spanStart.root
	if tt.HasParent() {
		var state trace.TraceState
		if v, ok := tracing.Header(t.Headers, tracing.Tracestate); ok {
			state, _ = trace.ParseTraceState(v) // an invalid one is dropped, as W3C says
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, tt.Remote(state))
		opts = s.spanStart.child
	}
	// Only the attempt's own start has the IDs: any child must get fresh
	// ones.
	_, span := s.tracer.Start(tracing.WithIDs(ctx, tt.TraceID, sid), "retryd.attempt", opts...)
	if sc := span.SpanContext(); sc.IsValid() {
		// The SDK's sampler decides the flags the target sees (with a
		// caller, by default, the caller's).
		tr.Flags = byte(sc.TraceFlags())
	}
	return tr, span
}

// endAttempt puts what t's attempt, sent to target (its destination's URL
// and path, or its own), came to on its span and ends it. It is
// called as soon as the answer was read (or the attempt failed), so the
// span ends at the SDK's clock rather than at res's: an end timestamp
// option would cost two allocations an attempt for the same instant.
func endAttempt(span trace.Span, t *store.Task, target string, res *dispatch.Result, p *retry.Policy) {
	if !span.IsRecording() {
		span.End()
		return
	}
	full, host, port := dispatch.SafeURL(target) // no credentials
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attribute.String("retryd.task.id", t.ID),
		attribute.Int("retryd.attempt", t.AttemptNumber),
		attribute.String("http.request.method", t.Method),
		attribute.String("url.full", full),
		attribute.String("server.address", host),
		attribute.Int("server.port", port))
	if res.Status > 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", res.Status))
	}
	switch {
	case res.Err != nil:
		attrs = append(attrs, attribute.String("error.type", errorType(res.Err)))
		span.SetStatus(codes.Error, res.Message())
	case res.Status >= 400 || res.Outcome(p) != dispatch.Success:
		// HTTP client spans mark 4xx and 5xx as errors, the status
		// saying why (a description would only repeat it); a redirect
		// not followed fails the attempt too.
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(res.Status)))
		span.SetStatus(codes.Error, "")
	}
	span.SetAttributes(attrs...)
	span.End()
}

// errorType is error.type for an attempt that got no response: low
// cardinality, as the attribute must be.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "timeout"
	case errors.Is(err, dispatch.ErrTargetRefused):
		return "target_refused"
	case errors.Is(err, dispatch.ErrBadTarget):
		return "bad_target"
	case errors.Is(err, dispatch.ErrBadRequest):
		return "bad_request"
	}
	return "_OTHER"
}

func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// storeSpan records one store call that carried n attempts (a claim, a
// finish) as a span of its own, with the call's own times.
func (s *Scheduler) storeSpan(name string, began, ended time.Time, n int, err error) {
	_, span := s.tracer.Start(context.Background(), name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(began), trace.WithAttributes(
			attribute.String("db.operation.name", name[len("store."):]),
			attribute.Int("db.operation.batch.size", n)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(ended))
}

// finishSpan records a group's TaskFinish, if it recorded the outcome of an
// attempt (not only of tasks finished without one).
func (s *Scheduler) finishSpan(batch []finished, began, ended time.Time, err error) {
	n := 0
	for i := range batch {
		if batch[i].f.Attempt.AttemptNumber > 0 {
			n++
		}
	}
	if n > 0 {
		s.storeSpan("store.TaskFinish", began, ended, n, err)
	}
}
