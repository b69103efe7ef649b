package retryotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
)

// ScopeName names the Observer's tracer and meter, as OpenTelemetry asks:
// the import path of the instrumenting package.
const ScopeName = "github.com/retrykit/retry/retryotel"

// SpanName is the name of the span made for each attempt.
const SpanName = "retry.attempt"

// GiveUpEventName is the name of the event added to the caller's span when
// an execution stops without an attempt of its own to report it.
const GiveUpEventName = "retry.give_up"

// The attributes of this package beyond OpenTelemetry's conventions; see
// the package documentation for their values.
const (
	AttemptKey     = attribute.Key("retry.attempt")
	MaxAttemptsKey = attribute.Key("retry.max_attempts")
	OutcomeKey     = attribute.Key("retry.outcome")
	DelayKey       = attribute.Key("retry.delay")
	StopReasonKey  = attribute.Key("retry.stop_reason")
	PolicyNameKey  = attribute.Key("retry.policy.name")
)

// The instruments' names.
const (
	AttemptsMetric           = "retry.attempts"
	RetriesMetric            = "retry.retries"
	GiveUpsMetric            = "retry.give_ups"
	DelayMetric              = "retry.delay"
	AttemptsPerSuccessMetric = "retry.attempts_per_success"
)

// Config sets up an Observer. The zero Config is ready to use: the global
// providers, no default name.
type Config struct {
	// TracerProvider makes the tracer of the attempt spans; nil means
	// otel.GetTracerProvider(), read when NewObserver is called (the global
	// provider hands spans on to one set later).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter of the instruments; nil means
	// otel.GetMeterProvider(), read when NewObserver is called.
	MeterProvider metric.MeterProvider
	// Name is the retry.policy.name of the events whose Policy has no Name
	// (a retryhttp Transport's, usually); empty leaves the attribute out of
	// them.
	Name string
}

// Observer is a retry.Observer that makes a span per attempt and records
// the package's metrics (see the package documentation). Make one with
// NewObserver; it is safe for concurrent use, and holds no state of any one
// execution, so one Observer may serve any number of policies.
type Observer struct {
	tracer trace.Tracer
	kind   trace.SpanStartOption // made once: an option is an allocation
	name   string

	attempts, retries, giveUps metric.Int64Counter
	delay                      metric.Float64Histogram
	perSuccess                 metric.Int64Histogram

	sets  attrSets
	types sync.Map // reflect.Type → its error.type; see describe
}

var _ retry.Observer = (*Observer)(nil)

// NewObserver returns an Observer that reports to c's providers. It fails
// only when the meter refuses an instrument; the error says which.
func NewObserver(c Config) (*Observer, error) {
	tp, mp := c.TracerProvider, c.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	o := &Observer{
		tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		kind:   trace.WithSpanKind(trace.SpanKindInternal),
		name:   c.Name,
		sets:   attrSets{m: make(map[attrKey]*measureOpts)},
	}
	m := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var errs [5]error
	o.attempts, errs[0] = m.Int64Counter(AttemptsMetric, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made, by outcome."))
	o.retries, errs[1] = m.Int64Counter(RetriesMetric, metric.WithUnit("{retry}"),
		metric.WithDescription("Failed attempts followed by another attempt."))
	o.giveUps, errs[2] = m.Int64Counter(GiveUpsMetric, metric.WithUnit("{execution}"),
		metric.WithDescription("Executions that stopped without success, by reason."))
	// Waits run from none to the hours a durable retry may wait: the
	// bounds cover both ends rather than the SDK's default ones, made for
	// request durations in milliseconds.
	o.delay, errs[3] = m.Float64Histogram(DelayMetric, metric.WithUnit("s"),
		metric.WithDescription("The wait before each retry."),
		metric.WithExplicitBucketBoundaries(0, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600))
	o.perSuccess, errs[4] = m.Int64Histogram(AttemptsPerSuccessMetric, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made by each execution that succeeded, the first included."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 8, 10, 15, 20))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("retryotel: creating instruments: %w", err)
	}
	return o, nil
}

// Observe reports e: a span for the attempt that ended, a child of ctx's
// span, and the metrics it counts in. It runs on the goroutine of the
// execution, before its wait, and does not block.
func (o *Observer) Observe(ctx context.Context, e retry.Event) {
	name := e.Name
	if name == "" {
		name = o.name
	}
	var f failure
	if e.Err != nil && e.Outcome != retry.Succeeded {
		f = o.describe(e.Err)
	}
	o.record(ctx, &e, name, f.errType)
	if e.Outcome == retry.Succeeded && e.Result != nil {
		f = succeeded(e.Result) // for the span only: the metrics count successes as such
	}
	// An attempt heard of already (Repeated), or none made: no attempt to
	// draw, but the caller's span still learns why the execution stopped.
	if e.Attempt <= 0 || e.Repeated {
		if e.Outcome == retry.GaveUp {
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.AddEvent(GiveUpEventName, trace.WithAttributes(
					AttemptKey.Int(e.Attempt), StopReasonKey.String(stopReason(e.Reason))))
			}
		}
		return
	}
	o.span(ctx, &e, name, &f)
}

// record adds e to the instruments. Each is asked whether it is enabled
// first: on the no-op providers (OpenTelemetry not set up) a measurement
// then costs nothing.
func (o *Observer) record(ctx context.Context, e *retry.Event, name, errType string) {
	switch e.Outcome {
	case retry.Succeeded:
		if o.perSuccess.Enabled(ctx) {
			o.perSuccess.Record(ctx, int64(e.Attempt), o.sets.get(name, "", attribute.KeyValue{}).rec...)
		}
	case retry.Retrying:
		if o.retries.Enabled(ctx) {
			o.retries.Add(ctx, 1, o.sets.get(name, errType, attribute.KeyValue{}).add...)
		}
		if o.delay.Enabled(ctx) {
			o.delay.Record(ctx, e.Delay.Seconds(), o.sets.get(name, "", attribute.KeyValue{}).rec...)
		}
	case retry.GaveUp:
		if o.giveUps.Enabled(ctx) {
			o.giveUps.Add(ctx, 1, o.sets.get(name, errType, StopReasonKey.String(stopReason(e.Reason))).add...)
		}
	}
	if e.Attempt > 0 && !e.Repeated && o.attempts.Enabled(ctx) {
		o.attempts.Add(ctx, 1, o.sets.get(name, errType, OutcomeKey.String(outcome(e.Outcome))).add...)
	}
}

// attrSets keeps the attributes of the measurements made so far, ready to
// pass: making an attribute.Set sorts and copies its attributes, and
// making the option allocates, which is most of what a measurement costs.
// A few hundred sets cover any sane use (policies × error types ×
// outcomes); past maxAttrSets, sets are made for each measurement instead,
// so that a Policy.Name made per call cannot grow the cache without bound.
type attrSets struct {
	mu sync.RWMutex
	m  map[attrKey]*measureOpts
}

// maxAttrSets bounds attrSets.
const maxAttrSets = 1024

// attrKey names a measurement's attributes: retry.policy.name, error.type
// and one more (an outcome, a stop reason), each left out when empty.
type attrKey struct {
	name, errType string
	extra         attribute.KeyValue
}

// measureOpts is a set of attributes as both kinds of instruments take it.
type measureOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func (c *attrSets) get(name, errType string, extra attribute.KeyValue) *measureOpts {
	k := attrKey{name, errType, extra}
	c.mu.RLock()
	m, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return m
	}
	var kv [3]attribute.KeyValue
	attrs := kv[:0]
	if name != "" {
		attrs = append(attrs, PolicyNameKey.String(name))
	}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	if extra.Key != "" {
		attrs = append(attrs, extra)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	m = &measureOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	c.mu.Lock()
	if len(c.m) < maxAttrSets {
		c.m[k] = m
	}
	c.mu.Unlock()
	return m
}

// span makes the span of the attempt e reports, after the fact: its
// times are the attempt's, from the event.
func (o *Observer) span(ctx context.Context, e *retry.Event, name string, f *failure) {
	start, end := e.Start, e.Start.Add(e.Duration)
	if start.IsZero() {
		// An executor that does not tell when the attempt began (its
		// events predate Event.Start): the attempt has just ended.
		end = time.Now()
		start = end.Add(-e.Duration)
	}
	var kv [7]attribute.KeyValue // as many as there can be
	attrs := append(kv[:0], AttemptKey.Int(e.Attempt), OutcomeKey.String(outcome(e.Outcome)))
	if e.MaxAttempts > 0 {
		attrs = append(attrs, MaxAttemptsKey.Int(e.MaxAttempts))
	}
	if name != "" {
		attrs = append(attrs, PolicyNameKey.String(name))
	}
	switch e.Outcome {
	case retry.Retrying:
		attrs = append(attrs, DelayKey.Float64(e.Delay.Seconds()))
	case retry.GaveUp:
		attrs = append(attrs, StopReasonKey.String(stopReason(e.Reason)))
	}
	if f.errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(f.errType))
	}
	switch {
	case f.httpStatus != 0:
		attrs = append(attrs, semconv.HTTPResponseStatusCodeKey.Int(f.httpStatus))
	case f.rpcStatus != "":
		attrs = append(attrs, semconv.RPCResponseStatusCodeKey.String(f.rpcStatus))
	}
	// The attributes go in at the start, where a sampler sees them.
	_, span := o.tracer.Start(ctx, SpanName, trace.WithTimestamp(start), o.kind, trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		span.End()
		return
	}
	at := trace.WithTimestamp(end)
	switch {
	case e.Err != nil && e.Outcome != retry.Succeeded:
		span.RecordError(e.Err, at)
		span.SetStatus(codes.Error, e.Err.Error())
	case f.errType != "":
		// A response the engine took as final that HTTP calls an error
		// (4xx, 5xx): client spans mark it so, the status saying why.
		span.SetStatus(codes.Error, "")
	}
	span.End(at)
}

// outcome names o as the attributes do: OpenTelemetry's enum values are
// snake_case, where Outcome.String says "gave-up".
func outcome(o retry.Outcome) string {
	switch o {
	case retry.Succeeded:
		return "succeeded"
	case retry.Retrying:
		return "retrying"
	case retry.GaveUp:
		return "gave_up"
	}
	return "_OTHER"
}

// stopReason names the reason an execution stopped, one of package retry's
// sentinels; "_OTHER", as OpenTelemetry spells a value outside the set, for
// anything else, so that a stray error's text never becomes an attribute
// value (a series per message).
func stopReason(reason error) string {
	switch {
	case reason == nil:
		return "_OTHER"
	case errors.Is(reason, retry.ErrAttemptsExhausted):
		return "attempts_exhausted"
	case errors.Is(reason, retry.ErrBudgetExhausted):
		return "budget_exhausted"
	case errors.Is(reason, retry.ErrNotRetryable):
		return "not_retryable"
	case errors.Is(reason, retry.ErrQuotaExhausted):
		return "quota_exhausted"
	case errors.Is(reason, retry.ErrCancelled):
		return "cancelled"
	}
	return "_OTHER"
}
