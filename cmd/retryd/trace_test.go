package main_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/retrykit/retry/service/tracing"
)

// The caller's span: the traceparent a client sends with its POST.
const (
	callerTrace  = "0af7651916cd43dd8448eb211c80319c"
	callerSpan   = "b7ad6b7169203331"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// collector is an OTLP/HTTP receiver on 127.0.0.1: it decodes every
// ExportTraceServiceRequest retryd sends and keeps the spans.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			t.Errorf("collector: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

// env is retryd's environment exporting to c, flushing every 100 ms.
func (c *collector) env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// span is an exported span, its IDs in hex.
type span struct {
	name, trace, id, parent string
	attrs                   map[string]string
}

func (c *collector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]span, len(c.spans))
	for i, s := range c.spans {
		out[i] = span{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
			parent: hex.EncodeToString(s.ParentSpanId), attrs: map[string]string{}}
		for _, a := range s.Attributes {
			v := a.Value.GetStringValue()
			if _, isInt := a.Value.Value.(*commonpb.AnyValue_IntValue); isInt {
				v = strconv.FormatInt(a.Value.GetIntValue(), 10)
			}
			out[i].attrs[a.Key] = v
		}
	}
	return out
}

// wait polls until cond holds for the spans exported so far.
func (c *collector) wait(t *testing.T, what string, cond func([]span) bool) []span {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans := c.all()
		if cond(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s among the %d spans exported: %+v", what, len(spans), spans)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func named(spans []span, name string) []span {
	var out []span
	for _, s := range spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// traced is a target on 127.0.0.1 that keeps the trace headers of every
// request: /fail/N answers 503 to the first N requests, then 200.
type traced struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newTraced(t *testing.T) *traced {
	t.Helper()
	tg := &traced{}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.seen = append(tg.seen, r.Header.Clone())
		n := len(tg.seen)
		tg.mu.Unlock()
		var fail int
		if rest, ok := strings.CutPrefix(r.URL.Path, "/fail/"); ok {
			fail = int(rest[0] - '0')
		}
		if n <= fail {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *traced) headers() []http.Header {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]http.Header(nil), tg.seen...)
}

// parents returns the trace and parent span of each traceparent the target
// saw, checking that every attempt had exactly one.
func (tg *traced) parents(t *testing.T) (traces, spans []string) {
	t.Helper()
	for i, h := range tg.headers() {
		v := h.Values("Traceparent")
		if len(v) != 1 || len(v[0]) != 55 || !strings.HasPrefix(v[0], "00-") {
			t.Fatalf("attempt %d carried traceparent %q, want one of version 00", i+1, v)
		}
		traces, spans = append(traces, v[0][3:35]), append(spans, v[0][36:52])
	}
	return traces, spans
}

// postTraced creates a task with the trace headers h, answering want.
func (d *daemon) postTraced(path string, h map[string]string, body any, want int, out any) {
	d.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		d.t.Fatal(err)
	}
	req, err := http.NewRequest("POST", d.url+path, bytes.NewReader(b))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		d.t.Fatalf("POST %s = %d %s, want %d", path, resp.StatusCode, rb, want)
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			d.t.Fatalf("POST %s: %v in %s", path, err, rb)
		}
	}
}

type tracedTask struct {
	TaskID  string            `json:"taskId"`
	Status  string            `json:"status"`
	TraceID string            `json:"traceId"`
	Headers map[string]string `json:"headers"`
}

type tracedAttempt struct {
	AttemptNumber int    `json:"attemptNumber"`
	TraceID       string `json:"traceId"`
	SpanID        string `json:"spanId"`
}

func (d *daemon) tracedAttempts(id string) []tracedAttempt {
	d.t.Helper()
	var got struct{ Items []tracedAttempt }
	d.call("GET", "/retry-tasks/"+id+"/attempts?limit=1000", nil, http.StatusOK, &got)
	return got.Items
}

// TestTraceFromCallToLastRetry: a task created with a traceparent reaches
// its target three times (503, 503, 200), each attempt a new child of the
// caller's span in the caller's trace; the spans retryd exports over OTLP
// say the same, with the span IDs the target saw, and the API request and
// the store's claims and finishes are there too.
func TestTraceFromCallToLastRetry(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	tg := newTraced(t)
	d := startDaemonEnv(t, col.env(), newDB(t), "--allow-target", "127.0.0.1/32")
	if !contains(d.log(), "tracing export on") || !contains(d.log(), col.URL+"/v1/traces") {
		t.Fatalf("retryd does not say that it exports spans, and where:\n%s", d.log())
	}
	d.putPolicy("quick", map[string]any{"backoff": "FIXED", "initialDelayMs": 50, "maxAttempts": 5, "jitterType": "NONE"})
	var created tracedTask
	d.postTraced("/retry-tasks", map[string]string{"traceparent": callerParent, "tracestate": "rojo=00f067aa0ba902b7", "baggage": "user=42"},
		map[string]any{"targetUrl": tg.URL + "/fail/2?token=secret", "policyId": "quick", "body": "{}"}, http.StatusCreated, &created)
	if created.TraceID != callerTrace {
		t.Fatalf("created task's traceId %q, want the caller's %s", created.TraceID, callerTrace)
	}
	done := d.waitTask(created.TaskID, terminal)
	if done.Status != "SUCCEEDED" {
		t.Fatalf("task %s, want SUCCEEDED", done.Status)
	}

	traces, parents := tg.parents(t)
	if len(parents) != 3 {
		t.Fatalf("target saw %d attempts, want 3", len(parents))
	}
	seen := map[string]bool{callerSpan: true}
	for i := range parents {
		if traces[i] != callerTrace || seen[parents[i]] {
			t.Fatalf("attempt %d: trace %s parent %s; want the caller's trace and a new parent each time (%v)", i+1, traces[i], parents[i], parents)
		}
		seen[parents[i]] = true
		h := tg.headers()[i]
		if h.Get("Tracestate") != "rojo=00f067aa0ba902b7" || h.Get("Baggage") != "user=42" {
			t.Fatalf("attempt %d: tracestate %q, baggage %q not forwarded", i+1, h.Get("Tracestate"), h.Get("Baggage"))
		}
	}
	for i, a := range d.tracedAttempts(created.TaskID) {
		if a.TraceID != callerTrace || a.SpanID != parents[i] {
			t.Fatalf("GET attempts: attempt %d has trace %s span %s; the target saw %s %s", a.AttemptNumber, a.TraceID, a.SpanID, callerTrace, parents[i])
		}
	}

	spans := col.wait(t, "3 attempt spans", func(s []span) bool { return len(named(s, "retryd.attempt")) >= 3 })
	attempts := map[string]span{}
	for _, s := range named(spans, "retryd.attempt") {
		if s.trace != callerTrace || s.parent != callerSpan {
			t.Fatalf("attempt span %s in trace %s with parent %s; want the caller's trace and span", s.id, s.trace, s.parent)
		}
		if u := s.attrs["url.full"]; strings.Contains(u, "secret") || u != tg.URL+"/fail/2" {
			t.Fatalf("attempt span's url.full %q: want the target without its query", u)
		}
		attempts[s.id] = s
	}
	for i, p := range parents {
		s, ok := attempts[p]
		if !ok {
			t.Fatalf("attempt %d: no exported span has the ID %s its target saw as its parent", i+1, p)
		}
		want := "503"
		if i == 2 {
			want = "200"
		}
		if s.attrs["http.response.status_code"] != want || s.attrs["http.request.method"] != "POST" {
			t.Fatalf("attempt %d: span attributes %v", i+1, s.attrs)
		}
	}
	// The first attempt's claim is the task's creation (the embedded store
	// creates a task due at once claimed: store.CreateClaimer), so the
	// store claims only the two retries.
	spans = col.wait(t, "the API request's span and each attempt's store spans", func(s []span) bool {
		return len(named(s, "POST /retry-tasks")) >= 1 && len(named(s, "store.TaskClaim")) >= 2 && len(named(s, "store.TaskFinish")) >= 3
	})
	api := named(spans, "POST /retry-tasks")[0]
	if api.trace != callerTrace || api.parent != callerSpan || api.attrs["retryd.task.id"] != created.TaskID {
		t.Fatalf("API span in trace %s with parent %s, attributes %v: want a child of the caller's span naming the task", api.trace, api.parent, api.attrs)
	}
	// The claims and the finishes are store calls of their own, each a
	// root saying how many attempts it carried.
	for _, name := range []string{"store.TaskClaim", "store.TaskFinish"} {
		for _, s := range named(spans, name) {
			if s.parent != "" || s.trace == callerTrace || s.attrs["db.operation.batch.size"] == "" {
				t.Fatalf("%s span in trace %s with parent %q, attributes %v: want a root of its own with its batch size",
					name, s.trace, s.parent, s.attrs)
			}
		}
	}
}

// TestTraceAcrossRestart: retryd stops between two attempts and starts
// again; the next attempt is still in the caller's trace, a child of the
// caller's span, and so is its exported span.
func TestTraceAcrossRestart(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	tg := newTraced(t)
	db := newDB(t)
	d := startDaemonEnv(t, col.env(), db, "--allow-target", "127.0.0.1/32")
	d.putPolicy("slow", map[string]any{"backoff": "FIXED", "initialDelayMs": 3000, "maxAttempts": 3, "jitterType": "NONE"})
	var created tracedTask
	d.postTraced("/retry-tasks", map[string]string{"traceparent": callerParent},
		map[string]any{"targetUrl": tg.URL + "/fail/1", "policyId": "slow"}, http.StatusCreated, &created)
	d.waitTask(created.TaskID, func(tk task) bool { return tk.AttemptNumber == 1 && tk.Status == "PENDING" })
	d.stop() // flushes its spans
	col.wait(t, "the first attempt's span", func(s []span) bool { return len(named(s, "retryd.attempt")) == 1 })

	d2 := startDaemonEnv(t, col.env(), db, "--allow-target", "127.0.0.1/32")
	if done := d2.waitTask(created.TaskID, terminal); done.Status != "SUCCEEDED" {
		t.Fatalf("task %s after the restart, want SUCCEEDED", done.Status)
	}
	traces, parents := tg.parents(t)
	if len(parents) != 2 || traces[0] != callerTrace || traces[1] != callerTrace || parents[0] == parents[1] ||
		parents[0] == callerSpan || parents[1] == callerSpan {
		t.Fatalf("the target saw traces %v parents %v; want the caller's trace, a new parent each attempt", traces, parents)
	}
	spans := col.wait(t, "both attempts' spans", func(s []span) bool { return len(named(s, "retryd.attempt")) == 2 })
	ids := map[string]bool{}
	for _, s := range named(spans, "retryd.attempt") {
		if s.trace != callerTrace || s.parent != callerSpan {
			t.Fatalf("attempt span %s in trace %s with parent %s", s.id, s.trace, s.parent)
		}
		ids[s.id] = true
	}
	if !ids[parents[0]] || !ids[parents[1]] {
		t.Fatalf("exported attempt spans %v, the target's parents %v", ids, parents)
	}
	for i, a := range d2.tracedAttempts(created.TaskID) {
		if a.SpanID != parents[i] {
			t.Fatalf("GET attempts: attempt %d span %s, the target saw %s", a.AttemptNumber, a.SpanID, parents[i])
		}
	}
}

// TestTraceWithoutContext: with export off, a task created without any
// trace context gets a trace of its own, named by GET and carried by every
// attempt, each with a parent span of its own; a repeat of a create with
// another traceparent is the same task (200), not a conflict; and a
// batch's traceparent goes to each of its tasks that has none.
func TestTraceWithoutContext(t *testing.T) {
	t.Parallel()
	tg := newTraced(t)
	d := startDaemon(t, newDB(t), "--allow-target", "127.0.0.1/32")
	if !contains(d.log(), "tracing export off") {
		t.Fatalf("retryd does not say that tracing export is off:\n%s", d.log())
	}
	d.putPolicy("quick", map[string]any{"backoff": "FIXED", "initialDelayMs": 50, "maxAttempts": 5, "jitterType": "NONE"})
	var own tracedTask
	d.postTraced("/retry-tasks", nil, map[string]any{"targetUrl": tg.URL + "/fail/2", "policyId": "quick"}, http.StatusCreated, &own)
	want := tracing.TraceIDOf(own.TaskID).String()
	if own.TraceID != want || !strings.HasPrefix(want, strings.ReplaceAll(own.TaskID, "-", "")[:16]) {
		t.Fatalf("traceId %q, want the task's own %s, made from its ID", own.TraceID, want)
	}
	if done := d.waitTask(own.TaskID, terminal); done.Status != "SUCCEEDED" {
		t.Fatalf("task %s, want SUCCEEDED", done.Status)
	}
	var got tracedTask
	d.call("GET", "/retry-tasks/"+own.TaskID, nil, http.StatusOK, &got)
	if got.TraceID != want {
		t.Fatalf("GET traceId %q, want %s", got.TraceID, want)
	}
	traces, parents := tg.parents(t)
	if len(traces) != 3 {
		t.Fatalf("target saw %d attempts, want 3", len(traces))
	}
	ps := map[string]bool{}
	for i := range traces {
		if traces[i] != want || ps[parents[i]] {
			t.Fatalf("attempt %d: trace %s parent %s; want %s and a new parent", i+1, traces[i], parents[i], want)
		}
		ps[parents[i]] = true
	}
	for i, a := range d.tracedAttempts(own.TaskID) {
		if a.TraceID != want || a.SpanID != parents[i] {
			t.Fatalf("GET attempts: attempt %d %s/%s, the target saw %s/%s", a.AttemptNumber, a.TraceID, a.SpanID, want, parents[i])
		}
	}

	// A client retrying its POST sends a new span: the same task answers.
	body := map[string]any{"targetUrl": tg.URL + "/fail/0", "policyId": "quick", "idempotencyKey": "order-7"}
	var first, again tracedTask
	d.postTraced("/retry-tasks", map[string]string{"traceparent": callerParent}, body, http.StatusCreated, &first)
	d.postTraced("/retry-tasks", map[string]string{"traceparent": "00-" + callerTrace + "-00f067aa0ba902b7-01"}, body, http.StatusOK, &again)
	if again.TaskID != first.TaskID || again.TraceID != callerTrace || again.Headers["Traceparent"] != callerParent {
		t.Fatalf("repeat: task %s trace %s headers %v; want task %s with the first POST's context", again.TaskID, again.TraceID, again.Headers, first.TaskID)
	}
	// The task's own traceparent wins over the request's, and is no part
	// of the request hash either.
	body["headers"] = map[string]string{"traceparent": "00-" + strings.Repeat("ab", 16) + "-" + callerSpan + "-01"}
	d.postTraced("/retry-tasks", map[string]string{"traceparent": callerParent}, body, http.StatusOK, &again)
	if again.TaskID != first.TaskID {
		t.Fatalf("repeat with a traceparent among the task's headers: task %s, want %s", again.TaskID, first.TaskID)
	}

	var batch struct {
		Items []struct {
			Status int        `json:"status"`
			Task   tracedTask `json:"task"`
		}
	}
	d.postTraced("/retry-tasks/batch", map[string]string{"traceparent": callerParent}, map[string]any{"tasks": []any{
		map[string]any{"targetUrl": tg.URL + "/fail/0", "policyId": "quick"},
		map[string]any{"targetUrl": tg.URL + "/fail/0", "policyId": "quick",
			"headers": map[string]string{"Traceparent": "00-" + strings.Repeat("cd", 16) + "-" + callerSpan + "-01"}},
	}}, http.StatusOK, &batch)
	if len(batch.Items) != 2 || batch.Items[0].Task.TraceID != callerTrace || batch.Items[1].Task.TraceID != strings.Repeat("cd", 16) {
		t.Fatalf("batch: %+v; want the request's trace for the first task, its own for the second", batch.Items)
	}
}
