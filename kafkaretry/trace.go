package kafkaretry

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
)

// SpanName is the name of the span the Processor starts for each handling of
// a record (see "Tracing" in the package doc).
const SpanName = "kafkaretry.handle"

// instrumentationName names the Processor's tracer, as OTel asks: the
// import path of the instrumenting package.
const instrumentationName = "github.com/retrykit/retry/kafkaretry"

// The span's attributes beyond OTel's messaging conventions.
const (
	attrAttempt           = attribute.Key("kafkaretry.attempt")
	attrOutcome           = attribute.Key("kafkaretry.outcome")
	attrForwardedTo       = attribute.Key("kafkaretry.forwarded_to")
	attrDLQReason         = attribute.Key("kafkaretry.dlq_reason")
	attrOriginalTopic     = attribute.Key("kafkaretry.original_topic")
	attrOriginalPartition = attribute.Key("kafkaretry.original_partition")
	attrOriginalOffset    = attribute.Key("kafkaretry.original_offset")
)

// DefaultPropagator returns the propagator a Config without one uses: W3C
// Trace Context and Baggage, the traceparent, tracestate and baggage headers
// that OTel's default setup (and franz-go's kotel plugin with it) writes. It
// is not the global propagator, whose default reads nothing: a record's
// trace context should reach the handler without the application having to
// configure anything.
func DefaultPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// newTracer returns the tracer of tp, or of the global provider when tp is
// nil.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		// The global provider delegates to the one the application sets,
		// even after New: a tracer taken from it now follows that one.
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName, trace.WithSchemaURL(semconv.SchemaURL))
}

// headerCarrier lets a propagator read a record's headers. Get returns the
// first header with the key, as kotel's carrier does, so that both read the
// same context from a record with a header twice.
type headerCarrier struct{ r *kgo.Record }

var _ propagation.TextMapCarrier = headerCarrier{}

func (c headerCarrier) Get(key string) string {
	for _, h := range c.r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set does nothing: the Processor only reads trace context, it writes no
// trace header of its own (see "Tracing"), and a carrier that cannot write
// keeps it so.
func (headerCarrier) Set(string, string) {}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c.r.Headers))
	for i, h := range c.r.Headers {
		keys[i] = h.Key
	}
	return keys
}

// startSpan returns ctx with the trace context it.rec carries in its headers
// and, as its child, the span of this handling; the Handler, the
// Policy.Observer and the forward all get the returned ctx, so whatever they
// start joins the record's trace.
func (p *Processor) startSpan(ctx context.Context, it item) (context.Context, trace.Span) {
	r := it.rec
	ctx = p.propagator.Extract(ctx, headerCarrier{r})
	group := p.groupOf(r.Topic)
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(r.Topic),
		semconv.MessagingDestinationPartitionID(strconv.FormatInt(int64(r.Partition), 10)),
		semconv.MessagingKafkaOffset(int(r.Offset)),
		semconv.MessagingConsumerGroupName(group),
		attrAttempt.Int(it.st.Attempt + 1),
	}
	if st := &it.st; st.OriginalTopic != "" {
		// A retry's span says where the record began, so that the handlings
		// of one record can be found together even when it had no trace
		// context to join.
		attrs = append(attrs, attrOriginalTopic.String(st.OriginalTopic),
			attrOriginalPartition.Int64(int64(st.OriginalPartition)), attrOriginalOffset.Int64(st.OriginalOffset))
	}
	return p.tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// endSpan records on span how the handling ended: e's outcome and error,
// and where fwd, the copy forwarded (nil after a success), went.
func endSpan(span trace.Span, fwd *kgo.Record, e retry.Event) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(e.Outcome.String()))
	if fwd != nil {
		span.SetAttributes(attrForwardedTo.String(fwd.Topic))
	}
	if e.Reason != nil {
		span.SetAttributes(attrDLQReason.String(e.Reason.Error()))
	}
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(e.Err)))
		span.SetStatus(codes.Error, truncate(e.Err.Error(), MaxErrorBytes))
	}
}

// endSpanUnsettled ends the span of a handling that did not settle the
// record: Run's context ended, or ProducePolicy gave up on the forward
// (err). The record is not done and will be handled again, so the outcome
// is neither the handler's success nor its failure; only a forward that
// failed is an error.
func endSpanUnsettled(ctx context.Context, span trace.Span, err error) {
	defer span.End()
	span.SetAttributes(attrOutcome.String("interrupted"))
	if ctx.Err() == nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, truncate(err.Error(), MaxErrorBytes))
	}
}
