package api_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// take returns the IDs woken since the last take.
func (w *wakes) take() []string {
	out := w.ids()
	w.mu.Lock()
	w.got = nil
	w.mu.Unlock()
	return out
}

// statusOf returns the task's status as GET answers it.
func statusOf(t *testing.T, e *env, id string) string {
	t.Helper()
	return e.do(t, "GET", "/retry-tasks/"+id, "").wantStatus(t, http.StatusOK)["status"].(string)
}

// bulkCall posts a bulk call and returns its count and more.
func bulkCall(t *testing.T, e *env, path, body string) (int, bool) {
	t.Helper()
	got := e.do(t, "POST", path, body).wantStatus(t, http.StatusOK)
	if len(got) != 2 {
		t.Errorf("%s answered %v, want count and more alone", path, got)
	}
	return int(got["count"].(float64)), got["more"].(bool)
}

func TestBulkRedriveAndCancel(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		w := &wakes{}
		e := setup(t, options{backend: backend, waker: w})
		d := makeDeadSet(t, e)
		w.take()

		// The 503s to a.example, two at a time: the filter moves on by
		// itself as redriven tasks leave it.
		wantA := []string{d.http503[0], d.http503[2], d.http503[4]}
		body := `{"targetHost":"a.example","cause":"HTTP 503","limit":2}`
		if n, more := bulkCall(t, e, "/retry-tasks/redrive", body); n != 2 || !more {
			t.Errorf("first redrive = %d, more %v; want 2, true", n, more)
		}
		if n, more := bulkCall(t, e, "/retry-tasks/redrive", body); n != 1 || more {
			t.Errorf("second redrive = %d, more %v; want 1, false", n, more)
		}
		if n, more := bulkCall(t, e, "/retry-tasks/redrive", body); n != 0 || more {
			t.Errorf("third redrive = %d, more %v; want 0, false", n, more)
		}
		woken := w.take()
		slices.Sort(woken)
		if want := slices.Sorted(slices.Values(wantA)); !slices.Equal(woken, want) {
			t.Errorf("woken %v, want the redriven %v", woken, want)
		}
		for _, id := range d.http503 {
			want := map[bool]string{true: "PENDING", false: "EXHAUSTED|FAILED"}[slices.Contains(wantA, id)]
			if got := statusOf(t, e, id); got != want && !(want == "EXHAUSTED|FAILED" && (got == "EXHAUSTED" || got == "FAILED")) {
				t.Errorf("503 task %s is %s, want %s", id, got, want)
			}
		}
		task := e.do(t, "GET", "/retry-tasks/"+wantA[0], "").wantStatus(t, http.StatusOK)
		if task["attemptNumber"] != 0.0 || task["cause"] != nil {
			t.Errorf("redriven task = %v, want attempts afresh and no cause", task)
		}

		// status narrows within the dead states.
		if n, _ := bulkCall(t, e, "/retry-tasks/redrive", `{"status":["FAILED"],"cause":"HTTP 503"}`); n != 2 {
			t.Errorf("redrive of FAILED 503s = %d, want 2 (those to b.example)", n)
		}

		// Cancel the pending tasks of c.example, then nothing is left.
		if n, more := bulkCall(t, e, "/retry-tasks/cancel", `{"targetHost":"c.example"}`); n != 2 || more {
			t.Errorf("cancel = %d, more %v; want 2, false", n, more)
		}
		for _, id := range d.pending {
			if got := statusOf(t, e, id); got != "CANCELLED" {
				t.Errorf("pending task %s is %s, want CANCELLED", id, got)
			}
		}
		if got := w.take(); len(got) != 2 {
			t.Errorf("woken %v, want the two FAILED 503s redriven, and none for cancels", got)
		}

		// An empty body, or {}: every dead letter (the default states).
		if n, more := bulkCall(t, e, "/retry-tasks/redrive", ""); n != 5 || more {
			t.Errorf("redrive of the rest = %d, more %v; want 5 (3 timeouts, 2 refusals), false", n, more)
		}
		// Every PENDING task, the ones just redriven included.
		if n, more := bulkCall(t, e, "/retry-tasks/cancel", `{"limit":1000}`); n != 10 || more {
			t.Errorf("cancel of every pending task = %d, more %v; want 10, false", n, more)
		}

		for _, tc := range []struct{ path, body, field string }{
			{"/retry-tasks/redrive", `{"status":["PENDING"]}`, "status"},
			{"/retry-tasks/redrive", `{"status":"FAILED"}`, "status"},
			{"/retry-tasks/cancel", `{"status":["SUCCEEDED"]}`, "status"},
			{"/retry-tasks/cancel", `{"status":["IN_FLIGHT"]}`, "status"},
			{"/retry-tasks/redrive", `{"limit":0}`, "limit"},
			{"/retry-tasks/redrive", `{"limit":1001}`, "limit"},
			{"/retry-tasks/redrive", `{"limit":1.5}`, "limit"},
			{"/retry-tasks/redrive", `{"cause":"HTTP"}`, "cause"},
			{"/retry-tasks/redrive", `{"targetHost":"http://a.example"}`, "targetHost"},
			{"/retry-tasks/redrive", `{"policyId":"a b"}`, "policyId"},
			{"/retry-tasks/cancel", `{"taskIds":[]}`, "taskIds"},
			{"/retry-tasks/cancel", `{"limit":1,"limit":2}`, "limit"},
			{"/retry-tasks/cancel", `[]`, ""},
		} {
			e.do(t, "POST", tc.path, tc.body).wantError(t, http.StatusBadRequest, "invalid_request", tc.field)
		}
		// The bulk routes are theirs; a task ID is still a task ID.
		e.do(t, "GET", "/retry-tasks/cancel", "").wantError(t, http.StatusNotFound, "not_found", "")
		e.do(t, "DELETE", "/retry-tasks/redrive", "").wantError(t, http.StatusNotFound, "not_found", "")
	})
}

// redriveUnder is the real store, redriving (through the store) the first
// task each TaskList lists before the API sees the page: another caller
// got there first.
type redriveUnder struct {
	store.Store
	tenant string
	mu     sync.Mutex
	taken  []string
}

func (s *redriveUnder) TaskList(ctx context.Context, f store.TaskFilter, p store.Page) ([]*store.Task, string, error) {
	items, next, err := s.Store.TaskList(ctx, f, p)
	if err == nil && len(items) > 0 {
		if _, err := s.Store.TaskTransition(ctx, store.Transition{Tenant: s.tenant, TaskID: items[0].ID,
			From: []store.Status{store.Exhausted, store.Failed}, To: store.Pending, Now: time.Now()}); err != nil {
			return nil, "", err
		}
		s.mu.Lock()
		s.taken = append(s.taken, items[0].ID)
		s.mu.Unlock()
	}
	return items, next, err
}

// A task that changed state under a bulk call is skipped, not an error.
func TestBulkSkipsTasksChangedMeanwhile(t *testing.T) {
	t.Parallel()
	under := &redriveUnder{tenant: "default"}
	e := setup(t, options{wrap: func(st store.Store) store.Store { under.Store = st; return under }})
	d := makeDeadSet(t, e)
	dead := slices.Concat(d.http503, d.timeout, d.refused)
	n, more := bulkCall(t, e, "/retry-tasks/redrive", `{}`)
	if n != len(dead)-1 || more {
		t.Errorf("redrive = %d, more %v; want %d (one redriven by another), false", n, more, len(dead)-1)
	}
	for _, id := range dead {
		if got := statusOf(t, e, id); got != "PENDING" {
			t.Errorf("dead task %s is %s, want PENDING", id, got)
		}
	}
	if len(under.taken) != 1 {
		t.Errorf("taken under the call: %v, want one", under.taken)
	}
}

// Dead letters are dismissed by a cancel that names their states, in bulk
// (a cause's group, as the console's Cancel does) or one by one; a cancel
// that names no state leaves them alone.
func TestCancelDismissesDeadLetters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		e := setup(t, options{backend: backend})
		d := makeDeadSet(t, e)
		if n, _ := bulkCall(t, e, "/retry-tasks/cancel", `{}`); n != len(d.pending) {
			t.Fatalf("a cancel naming no state cancelled %d tasks, want the %d pending ones", n, len(d.pending))
		}
		for _, id := range slices.Concat(d.http503, d.timeout, d.refused) {
			if got := statusOf(t, e, id); got == "CANCELLED" {
				t.Fatalf("a cancel naming no state dismissed dead letter %s", id)
			}
		}
		n, more := bulkCall(t, e, "/retry-tasks/cancel", `{"status":["EXHAUSTED","FAILED"],"cause":"timeout"}`)
		if n != len(d.timeout) || more {
			t.Fatalf("cancel of the timeouts' group = %d, more %v; want %d, false", n, more, len(d.timeout))
		}
		for _, id := range d.timeout {
			if got := statusOf(t, e, id); got != "CANCELLED" {
				t.Errorf("dismissed dead letter %s is %s", id, got)
			}
		}
		e.do(t, "DELETE", "/retry-tasks/"+d.refused[0], "").wantStatus(t, http.StatusOK)
		if got := statusOf(t, e, d.refused[0]); got != "CANCELLED" {
			t.Fatalf("a dead letter cancelled alone is %s", got)
		}
		e.do(t, "DELETE", "/retry-tasks/"+d.refused[0], "").wantError(t, http.StatusConflict, "conflict", "")
		got := e.do(t, "GET", "/dead-letters/causes", "").wantStatus(t, http.StatusOK)
		for _, g := range got["items"].([]any) {
			if c := g.(map[string]any)["cause"]; c == "timeout" {
				t.Errorf("the dismissed group is still listed: %v", g)
			}
		}
	})
}
