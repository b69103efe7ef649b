package kafkaretry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/kafkaretry"
)

// traceHeaders are the headers W3C propagators write.
var traceHeaders = []string{"traceparent", "tracestate", "baggage"}

// tracing returns an SDK tracer provider that exports every span, as it
// ends, to the returned in-memory exporter.
func tracing(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// recordCarrier writes a propagator's fields as record headers, as an
// instrumented producer (kotel, or any W3C propagator) does.
type recordCarrier struct{ r *kgo.Record }

func (c recordCarrier) Get(key string) string { return header(c.r, key) }

func (c recordCarrier) Set(key, value string) {
	for i, h := range c.r.Headers {
		if h.Key == key {
			c.r.Headers[i].Value = []byte(value)
			return
		}
	}
	c.r.Headers = append(c.r.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c recordCarrier) Keys() []string {
	var ks []string
	for _, h := range c.r.Headers {
		ks = append(ks, h.Key)
	}
	return ks
}

// tracedRecord returns record id of the main topic produced within a trace:
// an upstream span (with a tracestate, as a vendor's tracer adds one) whose
// child, the producer's span, is injected into the record's headers with
// baggage tenant=acme. It returns the producer's span context.
func tracedRecord(t *testing.T, tp trace.TracerProvider, id string) (*kgo.Record, trace.SpanContext) {
	t.Helper()
	tr := tp.Tracer("test-producer")
	ctx, upstream := tr.Start(t.Context(), "upstream")
	defer upstream.End()
	ts, err := trace.ParseTraceState("rk=upstream")
	if err != nil {
		t.Fatal(err)
	}
	ctx = trace.ContextWithSpanContext(ctx, upstream.SpanContext().WithTraceState(ts))
	m, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx = baggage.ContextWithBaggage(ctx, b)
	ctx, span := tr.Start(ctx, topic+" publish", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	r := rec(id, 0, kgo.RecordHeader{Key: "user", Value: []byte("u-1")})
	kafkaretry.DefaultPropagator().Inject(ctx, recordCarrier{r})
	for _, k := range traceHeaders {
		if header(r, k) == "" {
			t.Fatalf("the producer wrote no %s header: %s", k, headersText(r))
		}
	}
	return r, span.SpanContext()
}

// seen is what the Handler or the Observer found in its ctx.
type seen struct {
	attempt int
	topic   string // the Handler's record's topic; "" for the Observer
	sc      trace.SpanContext
	tenant  string // the baggage member tenant
}

type seenLog struct {
	mu  sync.Mutex
	all []seen
}

func (l *seenLog) add(ctx context.Context, attempt int, topic string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, seen{attempt: attempt, topic: topic, sc: trace.SpanContextFromContext(ctx),
		tenant: baggage.FromContext(ctx).Member("tenant").Value()})
}

func (l *seenLog) list() []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// publishHook does what kotel's producer hook does: it starts a publish
// span from the record's Context (the ctx the record was produced with) and
// injects it into the record's headers, replacing the trace context there.
type publishHook struct {
	tr   trace.Tracer
	prop propagation.TextMapPropagator
}

func (h publishHook) OnProduceRecordBuffered(r *kgo.Record) {
	ctx := r.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, span := h.tr.Start(ctx, r.Topic+" publish", trace.WithSpanKind(trace.SpanKindProducer))
	h.prop.Inject(ctx, recordCarrier{r})
	span.End()
	r.Context = ctx
}

// handleSpans returns the exported kafkaretry.handle spans by attempt, and
// every exported span by span id.
func handleSpans(t *testing.T, exp *tracetest.InMemoryExporter) (map[int]tracetest.SpanStub, map[trace.SpanID]tracetest.SpanStub) {
	t.Helper()
	byAttempt := make(map[int]tracetest.SpanStub)
	byID := make(map[trace.SpanID]tracetest.SpanStub)
	for _, s := range exp.GetSpans() {
		byID[s.SpanContext.SpanID()] = s
		if s.Name != kafkaretry.SpanName {
			continue
		}
		n := int(attr(s, "kafkaretry.attempt").AsInt64())
		if _, dup := byAttempt[n]; dup {
			t.Errorf("two %s spans of attempt %d", kafkaretry.SpanName, n)
		}
		byAttempt[n] = s
	}
	return byAttempt, byID
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// A record produced within a trace fails on the main topic, on both tiers
// and goes to the DLQ: its trace context is on every retry record and on the
// DLQ record, the Handler's and the Observer's ctx carry it (baggage
// included) on every attempt, and each handling's span is in the trace.
func TestTraceContextTravels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		hook bool // a producer hook that injects its own publish span, as kotel does
	}{
		{name: "headers copied"},
		{name: "kotel-like producer hook", hook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 1)
			tp, exp := tracing(t)
			var handled, observed seenLog
			cfg := kafkaretry.Config{
				Policy: retry.Policy{MaxAttempts: 3, Observer: retry.ObserverFunc(func(ctx context.Context, ev retry.Event) {
					observed.add(ctx, ev.Attempt, "")
				})},
				Tiers: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
				Handler: func(ctx context.Context, r *kgo.Record) error {
					st, _ := kafkaretry.ReadState(r)
					attempt := 1
					if r.Topic != topic {
						attempt = st.Attempt + 1
					}
					handled.add(ctx, attempt, r.Topic)
					return errFlaky
				},
				TracerProvider: tp,
			}
			if tt.hook {
				cfg.ClientOpts = []kgo.Opt{kgo.WithHooks(publishHook{tr: tp.Tracer("test-hook"), prop: kafkaretry.DefaultPropagator()})}
			}
			e.run(t, cfg)
			r, producer := tracedRecord(t, tp, "a")
			original := slices.Clone(r.Headers)
			e.produce(t, r)
			dlq := kafkaretry.DLQTopic(topic)
			waitFor(t, "a DLQ record", func() bool { return len(e.records(t, dlq)) == 1 })
			waitFor(t, "3 handle spans", func() bool { s, _ := handleSpans(t, exp); return len(s) == 3 })
			trace0 := producer.TraceID()

			// The records: every copy keeps the trace id; without a hook
			// that rewrites them, the trace headers are the original's,
			// byte for byte, and in their place among the user's headers.
			forwarded := []*kgo.Record{
				e.records(t, kafkaretry.RetryTopic(topic, 1))[0],
				e.records(t, kafkaretry.RetryTopic(topic, 2))[0],
				e.records(t, dlq)[0],
			}
			for _, f := range forwarded {
				sc := trace.SpanContextFromContext(kafkaretry.DefaultPropagator().Extract(context.Background(), recordCarrier{f}))
				if sc.TraceID() != trace0 {
					t.Errorf("%s record: trace id %s, want the original's %s (headers %s)", f.Topic, sc.TraceID(), trace0, headersText(f))
				}
				for _, k := range traceHeaders {
					if n := count(f, k); n != 1 {
						t.Errorf("%s record has %d %s headers, want 1", f.Topic, n, k)
					}
				}
				if tt.hook {
					continue
				}
				if got := f.Headers[:len(original)]; !slices.EqualFunc(got, original, sameHeader) {
					t.Errorf("%s record's headers %s, want the original's first: %s", f.Topic, headersText(f), headersText(&kgo.Record{Headers: original}))
				}
			}

			// The spans: one per handling, all in the original trace, with
			// the record's topic and attempt, failed, and the forward they
			// made.
			spans, byID := handleSpans(t, exp)
			wantTopic := []string{topic, kafkaretry.RetryTopic(topic, 1), kafkaretry.RetryTopic(topic, 2)}
			wantTo := []string{kafkaretry.RetryTopic(topic, 1), kafkaretry.RetryTopic(topic, 2), dlq}
			wantOutcome := []string{"retrying", "retrying", "gave-up"}
			for n := 1; n <= 3; n++ {
				s := spans[n]
				if s.SpanContext.TraceID() != trace0 {
					t.Errorf("attempt %d: span in trace %s, want %s", n, s.SpanContext.TraceID(), trace0)
				}
				if s.SpanKind != trace.SpanKindConsumer || s.Status.Code != codes.Error {
					t.Errorf("attempt %d: span kind %v status %v, want consumer, error", n, s.SpanKind, s.Status)
				}
				for k, want := range map[attribute.Key]string{
					"messaging.system":           "kafka",
					"messaging.destination.name": wantTopic[n-1],
					"kafkaretry.forwarded_to":    wantTo[n-1],
					"kafkaretry.outcome":         wantOutcome[n-1],
				} {
					if got := attr(s, k).Emit(); got != want {
						t.Errorf("attempt %d: span %s = %q, want %q", n, k, got, want)
					}
				}
				if n > 1 && attr(s, "kafkaretry.original_topic").AsString() != topic {
					t.Errorf("attempt %d: span has no kafkaretry.original_topic %q", n, topic)
				}
				// Its parent: the producer's span, which every copy names;
				// with the hook, the previous handling's publish span.
				want := producer.SpanID()
				if tt.hook && n > 1 {
					pub := byID[s.Parent.SpanID()]
					if pub.Name != wantTopic[n-1]+" publish" || pub.Parent.SpanID() != spans[n-1].SpanContext.SpanID() {
						t.Errorf("attempt %d: parent %q (its parent %s), want %q, child of attempt %d's span %s",
							n, pub.Name, pub.Parent.SpanID(), wantTopic[n-1]+" publish", n-1, spans[n-1].SpanContext.SpanID())
					}
					want = pub.SpanContext.SpanID()
				}
				if s.Parent.SpanID() != want || !s.Parent.IsRemote() {
					t.Errorf("attempt %d: parent %s (remote %t), want %s, from the record", n, s.Parent.SpanID(), s.Parent.IsRemote(), want)
				}
				if ts := s.SpanContext.TraceState().Get("rk"); ts != "upstream" {
					t.Errorf("attempt %d: tracestate rk=%q, want the original's upstream", n, ts)
				}
			}

			// The Handler's and the Observer's ctx: the span of that
			// handling, so what they start joins the trace, and the baggage.
			for _, who := range []struct {
				name string
				log  *seenLog
			}{{"Handler", &handled}, {"Observer", &observed}} {
				got := who.log.list()
				if len(got) != 3 {
					t.Fatalf("%s called %d times, want 3: %+v", who.name, len(got), got)
				}
				for _, s := range got {
					if want := spans[s.attempt].SpanContext; !s.sc.Equal(want) {
						t.Errorf("%s, attempt %d: ctx has span %s/%s, want the handling's %s/%s",
							who.name, s.attempt, s.sc.TraceID(), s.sc.SpanID(), want.TraceID(), want.SpanID())
					}
					if s.tenant != "acme" {
						t.Errorf("%s, attempt %d: baggage tenant=%q, want acme", who.name, s.attempt, s.tenant)
					}
				}
			}
		})
	}
}

// A record without trace context still goes through the retries and the
// DLQ, and the Processor invents none for its copies: it writes no trace
// header. Without a TracerProvider (the global no-op one) the Handler's ctx
// has no span; with one, each handling is a trace of its own, found
// together through kafkaretry.original_*.
func TestNoTraceContext(t *testing.T) {
	t.Parallel()
	for _, withTP := range []bool{false, true} {
		name := "global provider"
		if withTP {
			name = "SDK provider"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 1)
			var handled seenLog
			cfg := kafkaretry.Config{
				Policy: retry.Policy{MaxAttempts: 3},
				Tiers:  []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
				Handler: func(ctx context.Context, r *kgo.Record) error {
					handled.add(ctx, 0, r.Topic)
					return errFlaky
				},
			}
			var exp *tracetest.InMemoryExporter
			if withTP {
				cfg.TracerProvider, exp = tracing(t)
			}
			e.run(t, cfg)
			e.produce(t, rec("a", 0, kgo.RecordHeader{Key: "user", Value: []byte("u-1")}))
			dlq := kafkaretry.DLQTopic(topic)
			waitFor(t, "a DLQ record", func() bool { return len(e.records(t, dlq)) == 1 })

			for _, tpc := range []string{kafkaretry.RetryTopic(topic, 1), kafkaretry.RetryTopic(topic, 2), dlq} {
				f := e.records(t, tpc)[0]
				for _, k := range traceHeaders {
					if count(f, k) != 0 {
						t.Errorf("%s record has a %s header it was not produced with: %s", tpc, k, headersText(f))
					}
				}
				if header(f, "user") != "u-1" {
					t.Errorf("%s record lost the user header: %s", tpc, headersText(f))
				}
			}
			got := handled.list()
			if len(got) != 3 {
				t.Fatalf("handled %d times, want 3", len(got))
			}
			traces := make(map[trace.TraceID]bool)
			for _, s := range got {
				if s.sc.IsValid() != withTP {
					t.Errorf("%s: the Handler's ctx has a span: %t, want %t", s.topic, s.sc.IsValid(), withTP)
				}
				traces[s.sc.TraceID()] = true
			}
			if !withTP {
				return
			}
			if len(traces) != 3 {
				t.Errorf("the 3 handlings are in %d traces, want 3 roots", len(traces))
			}
			waitFor(t, "3 handle spans", func() bool { s, _ := handleSpans(t, exp); return len(s) == 3 })
			spans, _ := handleSpans(t, exp)
			for n, s := range spans {
				if s.Parent.IsValid() {
					t.Errorf("attempt %d: span has parent %s, want none", n, s.Parent.SpanID())
				}
			}
		})
	}
}

// Config.Propagator chooses what is read: TraceContext alone joins the
// trace but leaves the baggage out.
func TestPropagatorOption(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	tp, _ := tracing(t)
	var handled seenLog
	e.run(t, kafkaretry.Config{
		Propagator: propagation.TraceContext{},
		Handler: func(ctx context.Context, r *kgo.Record) error {
			handled.add(ctx, 1, r.Topic)
			return nil
		},
	})
	r, producer := tracedRecord(t, tp, "a")
	e.produce(t, r)
	waitFor(t, "a handling", func() bool { return len(handled.list()) == 1 })
	s := handled.list()[0]
	if s.sc.TraceID() != producer.TraceID() || s.sc.SpanID() != producer.SpanID() {
		t.Errorf("the Handler's ctx has span %s/%s, want the producer's %s/%s (no TracerProvider: no span of its own)",
			s.sc.TraceID(), s.sc.SpanID(), producer.TraceID(), producer.SpanID())
	}
	if s.tenant != "" {
		t.Errorf("baggage tenant=%q read without the Baggage propagator", s.tenant)
	}
}

// The retry state is written in headers of the Processor's own names, none
// of which a propagator writes: a record's state never replaces its trace
// context, whatever the state holds.
func TestStateHeadersLeaveTraceContext(t *testing.T) {
	t.Parallel()
	st := kafkaretry.State{
		Attempt: 2, ProcessAfter: time.UnixMilli(2), PrevDelay: time.Second, OriginalTopic: topic,
		FirstAttempt: time.UnixMilli(1), LastErrorType: "e", LastErrorMessage: "m", APIStatusCode: 503,
		APIResponse: "r", History: []kafkaretry.Failure{{Attempt: 1}}, DLQReason: "d",
	}
	fields := kafkaretry.DefaultPropagator().Fields()
	for _, h := range st.Headers() {
		if slices.Contains(fields, h.Key) || slices.Contains(traceHeaders, h.Key) {
			t.Errorf("the state writes %s, a propagator's header", h.Key)
		}
	}
}

// headersText shows r's headers as text, for a failure's message.
func headersText(r *kgo.Record) string {
	var b strings.Builder
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "%s=%q ", h.Key, h.Value)
	}
	return b.String()
}

func count(r *kgo.Record, k string) int {
	n := 0
	for _, h := range r.Headers {
		if h.Key == k {
			n++
		}
	}
	return n
}

func sameHeader(a, b kgo.RecordHeader) bool {
	return a.Key == b.Key && string(a.Value) == string(b.Value)
}
