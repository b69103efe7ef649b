package scheduler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

// parents is a target answering its script that keeps the traceparent of
// every request.
type parents struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []string
	script []int
}

func newParents(t *testing.T, script ...int) *parents {
	p := &parents{script: script}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		n := len(p.seen)
		p.seen = append(p.seen, r.Header.Get("Traceparent"))
		p.mu.Unlock()
		w.WriteHeader(p.script[min(n, len(p.script)-1)])
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *parents) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestAttemptsTraced checks that every attempt carries a traceparent of the
// task's trace, a child of its caller's span with a span ID of its own,
// and, with a tracer, is a span with that ID and the claim and the finish
// of its task as children.
func TestAttemptsTraced(t *testing.T) {
	t.Parallel()
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name    string
		headers map[string]string
		traced  bool
	}{
		{"caller's context, exported", map[string]string{"Traceparent": caller, "Tracestate": "rojo=1"}, true},
		{"caller's context, no tracer", map[string]string{"Traceparent": caller}, false},
		{"a trace of its own, exported", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, "")
			putPolicy(t, st, "p", fast(3))
			tg := newParents(t, 503, 503, 200)
			task, _, err := st.TaskCreate(context.Background(), &store.Task{
				Tenant: tenant, TargetURL: tg.URL + "/hook?token=secret", Method: "POST", PolicyID: "p",
				Headers: tc.headers, RequestHash: "h",
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(tracing.IDGenerator{}), sdktrace.WithSpanProcessor(rec))
			o := options{}
			if tc.traced {
				o.cfg.Tracer = tp
			}
			s, stop := start(t, st, o)
			s.Wake(task.Due())
			done := waitFor(t, st, task.ID, terminal)
			stop()
			if done.Status != store.Succeeded {
				t.Fatalf("task %s, want SUCCEEDED", done.Status)
			}

			want := tracing.Of(task.ID, tc.headers)
			seen := tg.all()
			if len(seen) != 3 {
				t.Fatalf("target saw %d attempts, want 3", len(seen))
			}
			ids := map[trace.SpanID]int{}
			for i, v := range seen {
				tid, sid, flags, ok := tracing.ParseTraceparent(v)
				if !ok || tid != want.TraceID || flags != want.Flags {
					t.Fatalf("attempt %d carried traceparent %q, want trace %s flags %s", i+1, v, want.TraceID, want.Flags)
				}
				if sid == want.Parent || ids[sid] != 0 {
					t.Fatalf("attempt %d: parent span %s is the caller's or an earlier attempt's", i+1, sid)
				}
				if w := tracing.AttemptSpanID(task.ID, i+1, done.BudgetStart); sid != w {
					t.Fatalf("attempt %d: parent span %s, want %s (AttemptSpanID)", i+1, sid, w)
				}
				ids[sid] = i + 1
			}
			if !tc.traced {
				return
			}
			if err := tp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
			carried := map[string]int64{} // attempts carried by the store calls, by name
			for _, s := range rec.Ended() {
				byID[s.SpanContext().SpanID()] = s
				if s.Name() == "store.TaskClaim" || s.Name() == "store.TaskFinish" {
					if s.Parent().IsValid() {
						t.Fatalf("%s span has parent %s, want a root", s.Name(), s.Parent().SpanID())
					}
					for _, a := range s.Attributes() {
						if a.Key == "db.operation.batch.size" {
							carried[s.Name()] += a.Value.AsInt64()
						}
					}
				}
			}
			// One task, three attempts: each claimed and finished once.
			if carried["store.TaskClaim"] != 3 || carried["store.TaskFinish"] != 3 {
				t.Fatalf("store spans carried %v attempts, want 3 claims and 3 finishes", carried)
			}
			for sid, n := range ids {
				s, ok := byID[sid]
				if !ok {
					t.Fatalf("no span %s for attempt %d, the target's parent", sid, n)
				}
				if s.Name() != "retryd.attempt" || s.SpanContext().TraceID() != want.TraceID || s.Parent().SpanID() != want.Parent {
					t.Fatalf("attempt %d: span %q in trace %s with parent %s", n, s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
				}
				attrs := map[string]string{}
				for _, a := range s.Attributes() {
					attrs[string(a.Key)] = a.Value.String()
				}
				status := "503"
				if n == 3 {
					status = "200"
				}
				if attrs["http.response.status_code"] != status || attrs["url.full"] != tg.URL+"/hook" || attrs["http.request.method"] != "POST" {
					t.Fatalf("attempt %d: attributes %v", n, attrs)
				}
			}
		})
	}
}
