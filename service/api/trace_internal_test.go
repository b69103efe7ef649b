package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

const (
	callerParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	otherParent  = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
)

func TestInheritTrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		own  map[string]string
		req  http.Header
		want map[string]string
	}{
		{
			name: "the request's context, lists joined",
			req:  http.Header{"Traceparent": {callerParent}, "Tracestate": {"a=1", "b=2"}, "Baggage": {"user=42"}},
			want: map[string]string{"Traceparent": callerParent, "Tracestate": "a=1,b=2", "Baggage": "user=42"},
		},
		{
			name: "the task's own traceparent wins, with whatever it has",
			own:  map[string]string{"Traceparent": otherParent, "X": "1"},
			req:  http.Header{"Traceparent": {callerParent}, "Tracestate": {"a=1"}},
			want: map[string]string{"Traceparent": otherParent, "X": "1"},
		},
		{
			name: "the task's own baggage is kept",
			own:  map[string]string{"Baggage": "mine=1"},
			req:  http.Header{"Traceparent": {callerParent}, "Baggage": {"user=42"}},
			want: map[string]string{"Traceparent": callerParent, "Baggage": "mine=1"},
		},
		{
			name: "an invalid traceparent is none",
			req:  http.Header{"Traceparent": {"00-xyz"}, "Tracestate": {"a=1"}},
		},
		{
			name: "two traceparents are none",
			req:  http.Header{"Traceparent": {callerParent, otherParent}},
		},
	} {
		q := &taskRequest{headers: tc.own}
		q.inheritTrace(tc.req)
		if len(q.headers) != len(tc.want) {
			t.Errorf("%s: headers %v, want %v", tc.name, q.headers, tc.want)
			continue
		}
		for k, v := range tc.want {
			if q.headers[k] != v {
				t.Errorf("%s: headers %v, want %v", tc.name, q.headers, tc.want)
			}
		}
	}
}

// TestHashWithoutTrace checks that the trace headers are no part of the
// request an idempotency key stands for, and that a task without them
// keeps the hash it had.
func TestHashWithoutTrace(t *testing.T) {
	t.Parallel()
	plain := &taskRequest{method: "POST", targetURL: "http://h/x", policyID: "p"}
	traced := &taskRequest{method: "POST", targetURL: "http://h/x", policyID: "p",
		headers: map[string]string{"Traceparent": callerParent, "Tracestate": "a=1", "Baggage": "b=2"}}
	other := &taskRequest{method: "POST", targetURL: "http://h/x", policyID: "p",
		headers: map[string]string{"traceparent": otherParent}}
	if plain.hash() != traced.hash() || plain.hash() != other.hash() {
		t.Error("trace headers change the request hash")
	}
	withX := &taskRequest{method: "POST", targetURL: "http://h/x", policyID: "p", headers: map[string]string{"X": "1"}}
	withXTraced := &taskRequest{method: "POST", targetURL: "http://h/x", policyID: "p",
		headers: map[string]string{"X": "1", "Traceparent": callerParent}}
	if withX.hash() != withXTraced.hash() || withX.hash() == plain.hash() {
		t.Error("the other headers do not count as they did")
	}
	if got := withoutTrace(withX.headers); got["X"] != "1" || len(got) != 1 {
		t.Errorf("withoutTrace(%v) = %v", withX.headers, got)
	}
}

// TestAttemptSpanIDs checks the span IDs GET .../attempts shows: those of
// the attempts since the budget last started, none for those before a
// redrive.
func TestAttemptSpanIDs(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_700_000_000_000)
	task := &store.Task{ID: "019ab1c2-d3e4-7f00-8123-456789abcdef", BudgetStart: start}
	before := attemptJSON(task, &store.Attempt{AttemptNumber: 2, StartedAt: start.Add(-time.Second)})
	after := attemptJSON(task, &store.Attempt{AttemptNumber: 1, StartedAt: start})
	want := tracing.TraceIDOf(task.ID).String()
	if before.TraceID != want || after.TraceID != want {
		t.Fatalf("traceIds %s, %s; want %s", before.TraceID, after.TraceID, want)
	}
	if before.SpanID != "" {
		t.Errorf("an attempt before the redrive has spanId %s", before.SpanID)
	}
	if after.SpanID != tracing.AttemptSpanID(task.ID, 1, start).String() {
		t.Errorf("spanId %s, want AttemptSpanID's", after.SpanID)
	}
}
