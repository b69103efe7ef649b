package dispatch_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/retrykit/retry/service/dispatch"
)

// TestSendTraceparent checks the trace headers an attempt carries: its own
// traceparent in place of the task's (whatever the case of its name), the
// task's tracestate and baggage as they are, and, without a Trace, the
// task's headers untouched.
func TestSendTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	caller := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tr := dispatch.Trace{
		TraceID: [16]byte{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:  [8]byte{1, 2, 3, 4, 5, 6, 7, 8},
		Flags:   1,
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		trace   dispatch.Trace
		want    map[string][]string
	}{
		{
			name:    "the task's context, a new parent",
			headers: map[string]string{"Traceparent": caller, "Tracestate": "rojo=00f067aa0ba902b7", "Baggage": "user=42"},
			trace:   tr,
			want: map[string][]string{
				"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-0102030405060708-01"},
				"Tracestate":  {"rojo=00f067aa0ba902b7"},
				"Baggage":     {"user=42"},
			},
		},
		{
			name:    "a name in another case is replaced too",
			headers: map[string]string{"traceparent": caller},
			trace:   tr,
			want:    map[string][]string{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-0102030405060708-01"}},
		},
		{
			name:    "no context of the task's: a root of its own",
			headers: map[string]string{"X-Other": "1"},
			trace:   dispatch.Trace{TraceID: [16]byte{15: 0xff}, SpanID: [8]byte{0: 0xab}},
			want: map[string][]string{
				"Traceparent": {"00-000000000000000000000000000000ff-ab00000000000000-00"},
				"X-Other":     {"1"},
			},
		},
		{
			name:    "no Trace: the task's headers as they are",
			headers: map[string]string{"Traceparent": caller},
			want:    map[string][]string{"Traceparent": {caller}},
		},
	} {
		res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: url, Headers: tc.headers, Trace: tc.trace})
		if res.Err != nil || res.Status != http.StatusOK {
			t.Fatalf("%s: Send = %d, %v", tc.name, res.Status, res.Err)
		}
		h := <-got
		for k, want := range tc.want {
			if g := h.Values(k); len(g) != len(want) || g[0] != want[0] {
				t.Errorf("%s: the target saw %s %q, want %q", tc.name, k, g, want)
			}
		}
		for _, k := range []string{"Tracestate", "Baggage"} {
			if _, ok := tc.want[k]; !ok && h.Get(k) != "" {
				t.Errorf("%s: the target saw %s %q, want none", tc.name, k, h.Get(k))
			}
		}
	}
}

func TestTraceValid(t *testing.T) {
	t.Parallel()
	if (dispatch.Trace{}).Valid() || (dispatch.Trace{TraceID: [16]byte{1}}).Valid() || (dispatch.Trace{SpanID: [8]byte{1}}).Valid() {
		t.Error("a Trace with a zero ID is valid")
	}
	if !(dispatch.Trace{TraceID: [16]byte{1}, SpanID: [8]byte{1}}).Valid() {
		t.Error("a Trace with both IDs is not valid")
	}
}

func TestSafeURL(t *testing.T) {
	t.Parallel()
	type safe struct {
		full, host string
		port       int
	}
	for in, want := range map[string]safe{
		"https://user:secret@api.example/hooks/7?token=abc#frag": {"https://api.example/hooks/7", "api.example", 443},
		"http://127.0.0.1:8080/a%2Fb?x=1":                        {"http://127.0.0.1:8080/a%2Fb", "127.0.0.1", 8080},
		"http://h":                                               {"http://h", "h", 80},
		"http://h?q=@evil/x":                                     {"http://h", "h", 80},
		"http://u:p@h/x@y":                                       {"http://h/x@y", "h", 80},
		"http://[::1]:81/p":                                      {"http://[::1]:81/p", "::1", 81},
		"https://[::1]/p":                                        {"https://[::1]/p", "::1", 443},
		"no scheme":                                              {},
	} {
		full, host, port := dispatch.SafeURL(in)
		if got := (safe{full, host, port}); got != want {
			t.Errorf("SafeURL(%q) = %+v, want %+v", in, got, want)
		}
	}
}
