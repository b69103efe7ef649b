package dispatch_test

import (
	"context"
	"net/http"
	"strconv"

	"testing"
	"time"

	"github.com/retrykit/retry/service/dispatch"
)

// A target learns the task and the attempt it answers from three headers
// the client writes over any of the task's or the destination's of those
// names, so that a target can trust them.
func TestSendTellsTheTargetTheTaskAndAttempt(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	first := time.UnixMilli(1_700_000_000_123)
	headers := map[string]string{"retrykit-task-id": "forged", "Retrykit-Attempt": "99", "X-Custom": "yes"}
	res := d.Send(context.Background(), dispatch.Request{
		Method: "POST", URL: url, Headers: headers, IdempotencyKey: "key-1",
		Extra:  []dispatch.Header{{Name: "Retrykit-First-Attempt-At", Value: "0"}},
		TaskID: "task-7", Attempt: 3, FirstAttemptAt: first,
	})
	if res.Err != nil || res.Status != http.StatusOK {
		t.Fatalf("Send = status %d, err %v; want 200", res.Status, res.Err)
	}
	h := <-got
	want := map[string]string{
		"Retrykit-Task-Id":          "task-7",
		"Retrykit-Attempt":          "3",
		"Retrykit-First-Attempt-At": strconv.FormatInt(first.UnixMilli(), 10),
		"Idempotency-Key":           "key-1",
		"X-Custom":                  "yes",
	}
	for k, v := range want {
		if g := h.Values(k); len(g) != 1 || g[0] != v {
			t.Errorf("%s = %q, want just %q", k, g, v)
		}
	}
	if len(headers) != 3 || headers["retrykit-task-id"] != "forged" {
		t.Errorf("the task's headers were changed: %v", headers)
	}
}

// Without a TaskID none of the three is sent, and a task's header of one
// of those names goes as it is.
func TestSendWithoutTaskIDSendsNoAttemptHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	res := d.Send(context.Background(), dispatch.Request{
		Method: "GET", URL: url, Headers: map[string]string{"Retrykit-Attempt": "mine"},
		Attempt: 2, FirstAttemptAt: time.Now(),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	h := <-got
	if v := h.Get("Retrykit-Task-Id") + h.Get("Retrykit-First-Attempt-At"); v != "" {
		t.Errorf("attempt headers sent without a task ID: %v", h)
	}
	if v := h.Values("Retrykit-Attempt"); len(v) != 1 || v[0] != "mine" {
		t.Errorf("Retrykit-Attempt = %q, want the task's own", v)
	}
}

func TestSendRefusesATaskIDThatIsNoHeaderValue(t *testing.T) {
	t.Parallel()
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the target was called")
	})
	res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url, TaskID: "a\r\nX-Evil: 1"})
	if res.Err == nil {
		t.Fatal("Send accepted a task ID with a line break")
	}
}

// Retrykit-Retry: never is read in any case and between white space; any
// other value, or none, asks nothing.
func TestSendReadsRetrykitRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fields map[string][]string
		want   bool
	}{
		{"never", map[string][]string{"Retrykit-Retry": {"never"}}, true},
		{"odd casing of both", map[string][]string{"rEtRyKiT-rEtRy": {"NeVeR"}}, true},
		{"white space around", map[string][]string{"Retrykit-Retry": {" \tnever\t "}}, true},
		{"the first field counts", map[string][]string{"Retrykit-Retry": {"never", "again"}}, true},
		{"another value", map[string][]string{"Retrykit-Retry": {"later"}}, false},
		{"never with more", map[string][]string{"Retrykit-Retry": {"never ever"}}, false},
		{"empty", map[string][]string{"Retrykit-Retry": {""}}, false},
		{"absent", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			handler := func(w http.ResponseWriter, r *http.Request) {
				for k, vs := range tt.fields {
					w.Header()[k] = vs // as given: Set would make the name canonical
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			d, url := setup(t, dispatch.Config{Guard: loopback}, handler)
			res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
			if res.Err != nil || res.Status != http.StatusServiceUnavailable {
				t.Fatalf("Send = status %d, err %v; want 503", res.Status, res.Err)
			}
			if res.NoRetry != tt.want {
				t.Errorf("NoRetry = %v, want %v", res.NoRetry, tt.want)
			}
			ref := dispatch.NewNetHTTP(nil, 1024, 64<<10, 5*time.Second)
			defer ref.Close()
			if r := ref.Send(context.Background(), dispatch.Request{Method: "GET", URL: url}); r.NoRetry != tt.want {
				t.Errorf("the reference's NoRetry = %v, want %v", r.NoRetry, tt.want)
			}
		})
	}
}
