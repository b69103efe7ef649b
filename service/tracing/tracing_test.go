package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestParseTraceparent(t *testing.T) {
	t.Parallel()
	tid, sid, flags, ok := tracing.ParseTraceparent(caller)
	if !ok || tid.String() != "0af7651916cd43dd8448eb211c80319c" || sid.String() != "b7ad6b7169203331" || flags != 1 {
		t.Fatalf("ParseTraceparent(%q) = %s %s %v %v", caller, tid, sid, flags, ok)
	}
	if got := tracing.FormatTraceparent(tid, sid, flags); got != caller {
		t.Fatalf("FormatTraceparent = %q, want %q", got, caller)
	}
	for _, v := range []string{
		"",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-", // version 00 has nothing more
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  // upper case
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",  // zero trace ID
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  // zero span ID
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  // version ff
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",  // bad flags
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  // bad separator
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", // a later version's extra field needs a dash
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",   // short span ID
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ", // trailing space
	} {
		if _, _, _, ok := tracing.ParseTraceparent(v); ok {
			t.Errorf("ParseTraceparent(%q) ok, want invalid", v)
		}
	}
	if _, _, _, ok := tracing.ParseTraceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later"); !ok {
		t.Error("a later version with more fields is refused")
	}
}

func TestOf(t *testing.T) {
	t.Parallel()
	id := "019ab1c2-d3e4-7f00-8123-456789abcdef"
	own := tracing.Of(id, nil)
	// Pinned: a task's trace ID must not change between versions.
	if own.TraceID.String() != "019ab1c2d3e47f00"+"0caf12354dee29c1" || own.HasParent() || !own.Flags.IsSampled() {
		t.Fatalf("Of without a context = %+v (%s); want the task's UUID's time, no parent, sampled", own, own.TraceID)
	}
	if got := tracing.Of(id, map[string]string{"Traceparent": "junk"}); got != own {
		t.Fatalf("Of with an invalid traceparent = %+v, want %+v", got, own)
	}
	got := tracing.Of(id, map[string]string{"traceparent": caller})
	if got.TraceID.String() != "0af7651916cd43dd8448eb211c80319c" || got.Parent.String() != "b7ad6b7169203331" || got.Flags != 1 {
		t.Fatalf("Of with the caller's context = %+v", got)
	}
	if upper := tracing.TraceIDOf("019AB1C2-D3E4-7F00-8123-456789ABCDEF"); upper != own.TraceID {
		t.Fatalf("TraceIDOf an upper-case UUID = %s, want %s", upper, own.TraceID)
	}
	if tid := tracing.TraceIDOf("not-a-uuid"); !tid.IsValid() || tid != tracing.TraceIDOf("not-a-uuid") {
		t.Fatalf("TraceIDOf a non-UUID = %s, want a valid, stable ID", tid)
	}
}

// TestSampledTasks checks that a ratio sampler keeps about its share of
// the tasks created without a trace context: their trace IDs come from
// version 7 UUIDs, whose fixed bits must not reach the bytes samplers read.
func TestSampledTasks(t *testing.T) {
	t.Parallel()
	sampler := sdktrace.TraceIDRatioBased(0.1)
	kept := 0
	const n = 20000
	for range n {
		p := sdktrace.SamplingParameters{TraceID: tracing.TraceIDOf(store.NewID()), Name: "retryd.attempt"}
		if sampler.ShouldSample(p).Decision == sdktrace.RecordAndSample {
			kept++
		}
	}
	if kept < n/10*8/10 || kept > n/10*12/10 {
		t.Fatalf("a 10 %% sampler kept %d of %d tasks", kept, n)
	}
}

// TestNoAllocation: what every attempt computes, exported or not, does not
// allocate (not parallel: AllocsPerRun).
func TestNoAllocation(t *testing.T) {
	id := "019ab1c2-d3e4-7f00-8123-456789abcdef"
	for _, headers := range []map[string]string{{"Content-Type": "application/json"}, {"Traceparent": caller}} {
		if n := testing.AllocsPerRun(100, func() {
			tracing.Of(id, headers)
			tracing.AttemptSpanID(id, 3, time.UnixMilli(1))
		}); n != 0 {
			t.Fatalf("with headers %v: a task's trace and an attempt's span ID take %v allocations, want none", headers, n)
		}
	}
}

func TestAttemptSpanID(t *testing.T) {
	t.Parallel()
	id := "019ab1c2-d3e4-7f00-8123-456789abcdef"
	start := time.UnixMilli(1_700_000_000_123)
	// Pinned: the span IDs of attempts already made must not change.
	if got := tracing.AttemptSpanID(id, 1, start).String(); got != "143f3d9f8a8b088a" {
		t.Fatalf("AttemptSpanID = %s", got)
	}
	seen := map[trace.SpanID]bool{}
	for n := 1; n <= 100; n++ {
		sid := tracing.AttemptSpanID(id, n, start)
		if !sid.IsValid() || seen[sid] {
			t.Fatalf("attempt %d: span ID %s invalid or repeated", n, sid)
		}
		seen[sid] = true
		// Stores keep milliseconds: a finer budget start gives the same ID.
		if again := tracing.AttemptSpanID(id, n, start.Add(400*time.Microsecond)); again != sid {
			t.Fatalf("attempt %d: %s, then %s from the same millisecond", n, sid, again)
		}
	}
	if tracing.AttemptSpanID(id, 1, start.Add(time.Millisecond)) == tracing.AttemptSpanID(id, 1, start) {
		t.Fatal("a redrive (new budget start) reuses the span IDs of the attempts before it")
	}
}

// TestIDGenerator checks that an SDK built with IDGenerator gives a span
// started under WithIDs those IDs, and its children fresh ones.
func TestIDGenerator(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator{}), sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")

	own := tracing.Of("019ab1c2-d3e4-7f00-8123-456789abcdef", nil)
	sid := tracing.AttemptSpanID("019ab1c2-d3e4-7f00-8123-456789abcdef", 1, time.UnixMilli(1))
	ctx, root := tr.Start(tracing.WithIDs(context.Background(), own.TraceID, sid), "root", trace.WithNewRoot())
	_, child := tr.Start(trace.ContextWithSpan(context.Background(), root), "child")
	child.End()
	root.End()
	_ = ctx
	if sc := root.SpanContext(); sc.TraceID() != own.TraceID || sc.SpanID() != sid {
		t.Fatalf("root span %s/%s, want %s/%s", sc.TraceID(), sc.SpanID(), own.TraceID, sid)
	}
	if sc := child.SpanContext(); sc.TraceID() != own.TraceID || sc.SpanID() == sid || !sc.SpanID().IsValid() {
		t.Fatalf("child span %s/%s, want trace %s and a span ID of its own", sc.TraceID(), sc.SpanID(), own.TraceID)
	}

	caller := tracing.Of("x", map[string]string{"Traceparent": caller})
	pctx := trace.ContextWithRemoteSpanContext(context.Background(), caller.Remote(trace.TraceState{}))
	_, span := tr.Start(tracing.WithIDs(pctx, caller.TraceID, sid), "attempt")
	span.End()
	ro := rec.Ended()[len(rec.Ended())-1]
	if ro.SpanContext().TraceID() != caller.TraceID || ro.SpanContext().SpanID() != sid || ro.Parent().SpanID() != caller.Parent {
		t.Fatalf("attempt span %s/%s parent %s; want %s/%s parent %s", ro.SpanContext().TraceID(), ro.SpanContext().SpanID(),
			ro.Parent().SpanID(), caller.TraceID, sid, caller.Parent)
	}

	_, plain := tr.Start(context.Background(), "plain")
	plain.End()
	if sc := plain.SpanContext(); !sc.IsValid() || sc.TraceID() == own.TraceID {
		t.Fatalf("a span without IDs got %s/%s", sc.TraceID(), sc.SpanID())
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	mux := http.NewServeMux()
	var inner trace.SpanContext
	mux.HandleFunc("POST /retry-tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /metrics", func(http.ResponseWriter, *http.Request) {})
	h := tracing.Handler(mux, tp, func(r *http.Request) bool { return r.URL.Path == "/metrics" })

	req := httptest.NewRequest("POST", "/retry-tasks/7", nil)
	req.Header.Set("traceparent", caller)
	h.ServeHTTP(httptest.NewRecorder(), req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1 (the scrape is skipped)", len(spans))
	}
	s := spans[0]
	if s.Name() != "POST /retry-tasks/{id}" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
	}
	if s.Parent().SpanID().String() != "b7ad6b7169203331" || s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("span's parent %s in trace %s: not the caller's", s.Parent().SpanID(), s.SpanContext().TraceID())
	}
	if inner.SpanID() != s.SpanContext().SpanID() {
		t.Error("the handler does not see the server span in its context")
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["http.response.status_code"] != "503" || attrs["http.route"] != "/retry-tasks/{id}" || s.Status().Code.String() != "Error" ||
		attrs["client.address"] != "192.0.2.1" || attrs["client.port"] != "1234" {
		t.Errorf("attributes %v, status %v", attrs, s.Status())
	}
}
