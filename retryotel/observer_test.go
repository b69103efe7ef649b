package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
)

// harness is an Observer on the real SDK, with in-memory exporters: every
// span ended so far, and the metrics on demand.
type harness struct {
	obs    *retryotel.Observer
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tracer trace.Tracer // the caller's
}

func setup(t *testing.T, c retryotel.Config) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	c.TracerProvider, c.MeterProvider = tp, mp
	obs, err := retryotel.NewObserver(c)
	if err != nil {
		t.Fatal(err)
	}
	h.obs, h.tracer = obs, tp.Tracer("caller")
	return h
}

// caller starts the span the caller of retry.Do holds.
func (h *harness) caller(t *testing.T) (context.Context, trace.Span) {
	t.Helper()
	return h.tracer.Start(t.Context(), "caller")
}

// attempts returns the attempt spans ended so far, in order, after
// checking that each is an internal child of parent, in its trace.
func (h *harness) attempts(t *testing.T, parent trace.Span) []tracetest.SpanStub {
	t.Helper()
	var got []tracetest.SpanStub
	for _, s := range h.spans.GetSpans() {
		if s.Name != retryotel.SpanName {
			continue
		}
		got = append(got, s)
		psc := parent.SpanContext()
		if s.Parent.SpanID() != psc.SpanID() || s.SpanContext.TraceID() != psc.TraceID() {
			t.Errorf("attempt span %s: parent %s in trace %s, want %s in %s",
				s.SpanContext.SpanID(), s.Parent.SpanID(), s.SpanContext.TraceID(), psc.SpanID(), psc.TraceID())
		}
		if s.SpanKind != trace.SpanKindInternal {
			t.Errorf("attempt span kind = %v, want internal", s.SpanKind)
		}
	}
	return got
}

// attrs renders a span's attributes as "key=value" lines, sorted.
func attrs(kvs []attribute.KeyValue) string {
	var lines []string
	for _, kv := range kvs {
		lines = append(lines, string(kv.Key)+"="+kv.Value.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, " ")
}

// metrics collects every metric of the Observer, one line per data point,
// sorted: "name (unit) {attributes} value", a histogram's value being its
// count, sum and the bounds of its non-empty buckets.
func (h *harness) metrics(t *testing.T) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, retryotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			head := m.Name + " (" + m.Unit + ") "
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s{%s} %d", head, set(p.Attributes), p.Value))
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s{%s} count=%d sum=%d", head, set(p.Attributes), p.Count, p.Sum))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s{%s} count=%d sum=%.3f", head, set(p.Attributes), p.Count, p.Sum))
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	slices.Sort(lines)
	return lines
}

func set(s attribute.Set) string { return attrs(s.ToSlice()) }

// equalLines reports a difference between two lists of lines.
func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

var errFlaky = errors.New("flaky")

// TestDoSpanTree runs retry.Do with two failures on a fake clock, each call
// taking 5ms: three attempt spans, children of the caller's, at the
// attempts' own times, 10ms and 20ms apart (the backoff's delays).
func TestDoSpanTree(t *testing.T) {
	t.Parallel()
	h := setup(t, retryotel.Config{})
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := retrytest.NewClock(t0)
	p := retry.Policy{Name: "charge", MaxAttempts: 3, Observer: h.obs, Clock: clock,
		Backoff: backoff.Policy{Base: 10 * time.Millisecond, Jitter: backoff.NoJitter}}
	ctx, caller := h.caller(t)
	calls := 0
	err := retry.Do(ctx, p, func(context.Context) error {
		clock.Advance(5 * time.Millisecond)
		if calls++; calls < 3 {
			return errFlaky
		}
		return nil
	})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}

	spans := h.attempts(t, caller)
	if len(spans) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(spans))
	}
	tests := []struct {
		attrs      string        // sorted
		start, end time.Duration // from t0
		status     codes.Code
	}{
		{"error.type=*errors.errorString retry.attempt=1 retry.delay=0.01 retry.max_attempts=3 retry.outcome=retrying retry.policy.name=charge",
			0, 5 * time.Millisecond, codes.Error},
		{"error.type=*errors.errorString retry.attempt=2 retry.delay=0.02 retry.max_attempts=3 retry.outcome=retrying retry.policy.name=charge",
			15 * time.Millisecond, 20 * time.Millisecond, codes.Error},
		{"retry.attempt=3 retry.max_attempts=3 retry.outcome=succeeded retry.policy.name=charge", 40 * time.Millisecond, 45 * time.Millisecond, codes.Unset},
	}
	for i, tt := range tests {
		s := spans[i]
		if got := attrs(s.Attributes); got != tt.attrs {
			t.Errorf("attempt %d: attributes\n\t%s\nwant\n\t%s", i+1, got, tt.attrs)
		}
		if got, want := s.StartTime, t0.Add(tt.start); !got.Equal(want) {
			t.Errorf("attempt %d: start %v, want %v", i+1, got.Sub(t0), tt.start)
		}
		if got, want := s.EndTime, t0.Add(tt.end); !got.Equal(want) {
			t.Errorf("attempt %d: end %v, want %v", i+1, got.Sub(t0), tt.end)
		}
		if i > 0 && !spans[i-1].EndTime.Before(s.StartTime) {
			t.Errorf("attempt %d starts at %v, before attempt %d ends at %v", i+1, s.StartTime.Sub(t0), i, spans[i-1].EndTime.Sub(t0))
		}
		if s.Status.Code != tt.status {
			t.Errorf("attempt %d: status %v, want %v", i+1, s.Status.Code, tt.status)
		}
		// A failed attempt's error is recorded, at the attempt's end.
		wantEvents := 0
		if tt.status == codes.Error {
			wantEvents = 1
			if s.Status.Description != "flaky" {
				t.Errorf("attempt %d: status description %q, want %q", i+1, s.Status.Description, "flaky")
			}
		}
		if len(s.Events) != wantEvents {
			t.Fatalf("attempt %d: %d events, want %d", i+1, len(s.Events), wantEvents)
		}
		if wantEvents == 1 && (s.Events[0].Name != "exception" || !s.Events[0].Time.Equal(s.EndTime)) {
			t.Errorf("attempt %d: event %q at %v, want the exception at the span's end", i+1, s.Events[0].Name, s.Events[0].Time.Sub(t0))
		}
	}
	// The gaps between the spans are the waits the policy slept.
	for i, d := range clock.Sleeps() {
		if gap := spans[i+1].StartTime.Sub(spans[i].EndTime); gap != d {
			t.Errorf("gap after attempt %d = %v, want the delay slept, %v", i+1, gap, d)
		}
	}

	equalLines(t, "metrics", h.metrics(t), []string{
		"retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=retrying retry.policy.name=charge} 2",
		"retry.attempts ({attempt}) {retry.outcome=succeeded retry.policy.name=charge} 1",
		"retry.attempts_per_success ({attempt}) {retry.policy.name=charge} count=1 sum=3",
		"retry.delay (s) {retry.policy.name=charge} count=2 sum=0.030",
		"retry.retries ({retry}) {error.type=*errors.errorString retry.policy.name=charge} 2",
	})
}

// TestGiveUps: the last attempt's span says why the execution stopped; an
// execution stopped with no attempt of its own to report it tells the
// caller's span; the give-ups are counted by reason, the attempts once each.
func TestGiveUps(t *testing.T) {
	t.Parallel()
	type want struct {
		spans   []string // each attempt span's outcome, stop reason and error.type
		event   string   // the caller's span's give-up event, if any
		metrics []string
	}
	tests := []struct {
		name string
		// run calls retry.Do with p under ctx and its cancel func.
		run  func(ctx context.Context, cancel context.CancelFunc, p retry.Policy) error
		want want
	}{
		{
			name: "attempts exhausted",
			run: func(ctx context.Context, _ context.CancelFunc, p retry.Policy) error {
				return retry.Do(ctx, p, func(context.Context) error { return errFlaky })
			},
			want: want{
				spans: []string{"retrying  *errors.errorString", "gave_up attempts_exhausted *errors.errorString"},
				metrics: []string{
					"retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=gave_up retry.policy.name=op} 1",
					"retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=retrying retry.policy.name=op} 1",
					"retry.delay (s) {retry.policy.name=op} count=1 sum=0.010",
					"retry.give_ups ({execution}) {error.type=*errors.errorString retry.policy.name=op retry.stop_reason=attempts_exhausted} 1",
					"retry.retries ({retry}) {error.type=*errors.errorString retry.policy.name=op} 1",
				},
			},
		},
		{
			// error.type sees through retry.Permanent to the error it marks.
			name: "not retryable",
			run: func(ctx context.Context, _ context.CancelFunc, p retry.Policy) error {
				return retry.Do(ctx, p, func(context.Context) error { return retry.Permanent(errFlaky) })
			},
			want: want{
				spans: []string{"gave_up not_retryable *errors.errorString"},
				metrics: []string{
					"retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=gave_up retry.policy.name=op} 1",
					"retry.give_ups ({execution}) {error.type=*errors.errorString retry.policy.name=op retry.stop_reason=not_retryable} 1",
				},
			},
		},
		{
			name: "cancelled before the first call",
			run: func(ctx context.Context, cancel context.CancelFunc, p retry.Policy) error {
				cancel()
				return retry.Do(ctx, p, func(context.Context) error { return nil })
			},
			want: want{
				event: "retry.give_up retry.attempt=0 retry.stop_reason=cancelled",
				metrics: []string{
					"retry.give_ups ({execution}) {retry.policy.name=op retry.stop_reason=cancelled} 1",
				},
			},
		},
		{
			// The attempt was reported as retrying; the wait after it is
			// cut short: the attempt is counted once, its span made once.
			name: "cancelled during the wait",
			run: func(ctx context.Context, cancel context.CancelFunc, p retry.Policy) error {
				p.Observer = retry.Observers{p.Observer, retry.OnRetry(func(context.Context, retry.Event) { cancel() })}
				return retry.Do(ctx, p, func(context.Context) error { return errFlaky })
			},
			want: want{
				spans: []string{"retrying  *errors.errorString"},
				event: "retry.give_up retry.attempt=1 retry.stop_reason=cancelled",
				metrics: []string{
					"retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=retrying retry.policy.name=op} 1",
					"retry.delay (s) {retry.policy.name=op} count=1 sum=0.010",
					"retry.give_ups ({execution}) {error.type=*errors.errorString retry.policy.name=op retry.stop_reason=cancelled} 1",
					"retry.retries ({retry}) {error.type=*errors.errorString retry.policy.name=op} 1",
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, retryotel.Config{Name: "op"}) // the Policy has no Name
			p := retry.Policy{MaxAttempts: 2, Observer: h.obs, Clock: retrytest.NewClock(time.Now()),
				Backoff: backoff.Policy{Base: 10 * time.Millisecond, Jitter: backoff.NoJitter}}
			ctx, caller := h.caller(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if err := tt.run(ctx, cancel, p); err == nil {
				t.Fatal("Do succeeded, want it to give up")
			}
			caller.End()

			var spans []string
			for _, s := range h.attempts(t, caller) {
				var outcome, reason, errType string
				for _, kv := range s.Attributes {
					switch kv.Key {
					case retryotel.OutcomeKey:
						outcome = kv.Value.AsString()
					case retryotel.StopReasonKey:
						reason = kv.Value.AsString()
					case "error.type":
						errType = kv.Value.AsString()
					}
				}
				spans = append(spans, outcome+" "+reason+" "+errType)
			}
			equalLines(t, "attempt spans", spans, tt.want.spans)

			var events []string
			for _, s := range h.spans.GetSpans() {
				if s.Name == "caller" {
					for _, e := range s.Events {
						events = append(events, e.Name+" "+attrs(e.Attributes))
					}
				}
			}
			var wantEvents []string
			if tt.want.event != "" {
				wantEvents = []string{tt.want.event}
			}
			equalLines(t, "the caller's span's events", events, wantEvents)
			equalLines(t, "metrics", h.metrics(t), tt.want.metrics)
		})
	}
}

// TestEventWithoutStart is an executor that does not fill in Event.Start
// (kafkaretry's and retryd's events, so far): the span ends when the event
// is heard and lasts the attempt's Duration; the error's HTTP status is an
// attribute.
func TestEventWithoutStart(t *testing.T) {
	t.Parallel()
	h := setup(t, retryotel.Config{})
	ctx, caller := h.caller(t)
	before := time.Now()
	h.obs.Observe(ctx, retry.Event{Outcome: retry.Retrying, Name: "orders", Attempt: 2, MaxAttempts: 5,
		Err: statusError(502), Duration: 30 * time.Millisecond, Delay: 2 * time.Second})
	after := time.Now()
	caller.End()

	spans := h.attempts(t, caller)
	if len(spans) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(spans))
	}
	s := spans[0]
	if s.EndTime.Before(before) || s.EndTime.After(after) {
		t.Errorf("span ended at %v, want between %v and %v", s.EndTime, before, after)
	}
	if d := s.EndTime.Sub(s.StartTime); d != 30*time.Millisecond {
		t.Errorf("span lasted %v, want the attempt's 30ms", d)
	}
	want := "error.type=502 http.response.status_code=502 retry.attempt=2 retry.delay=2 retry.max_attempts=5 retry.outcome=retrying retry.policy.name=orders"
	if got := attrs(s.Attributes); got != want {
		t.Errorf("attributes\n\t%s\nwant\n\t%s", got, want)
	}
}

// statusError is an error with an HTTP status, as retry reads one.
type statusError int

func (e statusError) Error() string       { return fmt.Sprintf("http status %d", int(e)) }
func (e statusError) HTTPStatusCode() int { return int(e) }

// TestNewObserverDefaults: the zero Config takes the global providers, which
// do nothing until the application sets them.
func TestNewObserverDefaults(t *testing.T) {
	t.Parallel()
	obs, err := retryotel.NewObserver(retryotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := retry.Do(t.Context(), retry.Policy{Observer: obs}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestErrorType: error.type and the status attributes of a failed attempt,
// by what its error says of itself.
func TestErrorType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string // the span's error.type and status attributes
	}{
		{"plain", errFlaky, "error.type=*errors.errorString"},
		{"wrapped by fmt", fmt.Errorf("charging: %w", errFlaky), "error.type=*errors.errorString"},
		{"marked permanent", retry.Permanent(fmt.Errorf("charging: %w", errFlaky)), "error.type=*errors.errorString"},
		{"with a hint", retry.After(time.Second, context.DeadlineExceeded), "error.type=context.deadlineExceededError"},
		{"HTTP status", fmt.Errorf("charging: %w", statusError(503)), "error.type=503 http.response.status_code=503"},
		{"RPC status, joined", errors.Join(errFlaky, rpcError("RESOURCE_EXHAUSTED")), "error.type=RESOURCE_EXHAUSTED rpc.response.status_code=RESOURCE_EXHAUSTED"},
		{"an ErrorType method", fmt.Errorf("charging: %w", typedError{}), "error.type=card_declined"},
		{"several %w", fmt.Errorf("%w and %w", errFlaky, errFlaky), "error.type=*fmt.wrapErrors"},
	}
	h := setup(t, retryotel.Config{})
	for _, tt := range tests {
		// Twice: the second comes from the Observer's memory of types.
		for range 2 {
			h.spans.Reset()
			h.obs.Observe(t.Context(), retry.Event{Outcome: retry.Retrying, Attempt: 1, Err: tt.err})
			var got []string
			for _, s := range h.spans.GetSpans() {
				for _, kv := range s.Attributes {
					switch kv.Key {
					case "error.type", "http.response.status_code", "rpc.response.status_code":
						got = append(got, string(kv.Key)+"="+kv.Value.String())
					}
				}
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("%s: %s, want %s", tt.name, g, tt.want)
			}
		}
	}
}

// rpcError names its RPC status code, as retrygrpc's attempts do.
type rpcError string

func (e rpcError) Error() string         { return "rpc error: " + string(e) }
func (e rpcError) RPCStatusCode() string { return string(e) }

// typedError names its own error.type.
type typedError struct{}

func (typedError) Error() string     { return "card declined" }
func (typedError) ErrorType() string { return "card_declined" }

// TestConcurrentUse shares one Observer between goroutines and policies
// (run with -race): every attempt is counted.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	h := setup(t, retryotel.Config{})
	const goroutines, calls = 8, 50
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			p := retry.Policy{Name: fmt.Sprint("policy-", g%2), MaxAttempts: 3, Observer: h.obs,
				Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}}
			for range calls {
				n := 0
				err := retry.Do(t.Context(), p, func(context.Context) error {
					if n++; n < 3 {
						return fmt.Errorf("attempt %d: %w", n, errFlaky)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range goroutines {
		<-done
	}
	const each = goroutines / 2 * calls // executions per policy
	equalLines(t, "metrics", h.metrics(t), []string{
		fmt.Sprintf("retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=retrying retry.policy.name=policy-0} %d", 2*each),
		fmt.Sprintf("retry.attempts ({attempt}) {error.type=*errors.errorString retry.outcome=retrying retry.policy.name=policy-1} %d", 2*each),
		fmt.Sprintf("retry.attempts ({attempt}) {retry.outcome=succeeded retry.policy.name=policy-0} %d", each),
		fmt.Sprintf("retry.attempts ({attempt}) {retry.outcome=succeeded retry.policy.name=policy-1} %d", each),
		fmt.Sprintf("retry.attempts_per_success ({attempt}) {retry.policy.name=policy-0} count=%d sum=%d", each, 3*each),
		fmt.Sprintf("retry.attempts_per_success ({attempt}) {retry.policy.name=policy-1} count=%d sum=%d", each, 3*each),
		fmt.Sprintf("retry.delay (s) {retry.policy.name=policy-0} count=%d sum=0.000", 2*each),
		fmt.Sprintf("retry.delay (s) {retry.policy.name=policy-1} count=%d sum=0.000", 2*each),
		fmt.Sprintf("retry.retries ({retry}) {error.type=*errors.errorString retry.policy.name=policy-0} %d", 2*each),
		fmt.Sprintf("retry.retries ({retry}) {error.type=*errors.errorString retry.policy.name=policy-1} %d", 2*each),
	})
	if got, want := len(h.spans.GetSpans()), goroutines*calls*3; got != want {
		t.Errorf("%d spans, want %d", got, want)
	}
}
