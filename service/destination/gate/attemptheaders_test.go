package gate_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAttemptHeadersSwitchedOff: a destination with attemptHeaders false
// sends its attempts without Retrykit-Task-Id, Retrykit-Attempt and
// Retrykit-First-Attempt-At (a task's own header of one of those names
// goes as it is); the default, and a patch back to it, sends them.
func TestAttemptHeadersSwitchedOff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"quiet","url":"`+tg.URL+`","attemptHeaders":false}`, http.StatusCreated)
	var d struct {
		AttemptHeaders *bool `json:"attemptHeaders"`
	}
	if err := json.Unmarshal(e.call("GET", "/destinations/quiet", "", http.StatusOK), &d); err != nil {
		t.Fatal(err)
	}
	if d.AttemptHeaders == nil || *d.AttemptHeaders {
		t.Fatalf("attemptHeaders answered %v, want false", d.AttemptHeaders)
	}
	tk := e.create(`{"destinationId":"quiet","path":"/off","headers":{"Retrykit-Attempt":"mine"}}`)
	e.wait(tk.TaskID, "SUCCEEDED")
	got := tg.requests()
	if len(got) != 1 {
		t.Fatalf("target saw %d requests, want 1", len(got))
	}
	h := got[0].Header
	if h.Get("Retrykit-Task-Id") != "" || h.Get("Retrykit-First-Attempt-At") != "" || h.Get("Retrykit-Attempt") != "mine" {
		t.Errorf("switched off, the target saw %v", h)
	}
	if h.Get("Idempotency-Key") != tk.IdempotencyKey {
		t.Errorf("Idempotency-Key = %q, want the task's %q", h.Get("Idempotency-Key"), tk.IdempotencyKey)
	}

	// null removes the member: the default, on.
	e.call("PATCH", "/destinations/quiet", `{"attemptHeaders":null}`, http.StatusOK)
	tk = e.create(`{"destinationId":"quiet","path":"/on","headers":{"Retrykit-Attempt":"mine"}}`)
	e.wait(tk.TaskID, "SUCCEEDED")
	got = tg.requests()
	if len(got) != 2 {
		t.Fatalf("target saw %d requests, want 2", len(got))
	}
	h = got[1].Header
	first, err := strconv.ParseInt(h.Get("Retrykit-First-Attempt-At"), 10, 64)
	if h.Get("Retrykit-Task-Id") != tk.TaskID || h.Values("Retrykit-Attempt")[0] != "1" || len(h.Values("Retrykit-Attempt")) != 1 ||
		err != nil || first <= 0 {
		t.Errorf("switched on again, the target saw %v", h)
	}
}

// TestAttemptHeadersCountAttempts: by default a destination's attempts
// carry the task's ID, their number and when the first was due, the same
// on every retry.
func TestAttemptHeadersCountAttempts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var n atomic.Int32
	tg := newTarget(t, func(*http.Request) int {
		if n.Add(1) < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	e.call("POST", "/destinations", `{"destinationId":"loud","url":"`+tg.URL+`"}`, http.StatusCreated)
	tk := e.create(`{"destinationId":"loud","path":"/x","policyId":"fast"}`)
	e.wait(tk.TaskID, "SUCCEEDED")
	got := tg.requests()
	if len(got) != 3 {
		t.Fatalf("target saw %d requests, want 3", len(got))
	}
	first := got[0].Header.Get("Retrykit-First-Attempt-At")
	for i, r := range got {
		if r.Header.Get("Retrykit-Task-Id") != tk.TaskID || r.Header.Get("Retrykit-Attempt") != strconv.Itoa(i+1) ||
			first == "" || r.Header.Get("Retrykit-First-Attempt-At") != first {
			t.Errorf("attempt %d carried %v", i+1, r.Header)
		}
	}
}

// A destination may not set the headers retryd sets for each attempt, nor
// give attemptHeaders as anything but a boolean.
func TestAttemptHeadersRefusedAsDestinationHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for field, body := range map[string]string{
		"headers.retrykit-task-id": `{"destinationId":"d1","url":"http://127.0.0.1:1","headers":{"retrykit-task-id":"x"}}`,
		"auth.name":                `{"destinationId":"d2","url":"http://127.0.0.1:1","auth":{"type":"header","name":"Retrykit-Attempt","value":"x"}}`,
		"attemptHeaders":           `{"destinationId":"d3","url":"http://127.0.0.1:1","attemptHeaders":"no"}`,
	} {
		b := e.call("POST", "/destinations", body, http.StatusBadRequest)
		if !strings.Contains(string(b), `"field":"`+field+`"`) {
			t.Errorf("POST %s answered %s, want field %s named", body, b, field)
		}
	}
}
