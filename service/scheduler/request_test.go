package scheduler_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/retrykit/retry/service/store"
)

// TestEveryAttemptSendsTheStoredRequest retries a task twice: the retries'
// claims skip reading the request (the scheduler keeps it from the first
// claim), and what reaches the target must not change.
func TestEveryAttemptSendsTheStoredRequest(t *testing.T) {
	t.Parallel()
	type seen struct{ method, path, header, key, body string }
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.RequestURI(), r.Header.Get("X-Order"), r.Header.Get("Idempotency-Key"), string(body)})
		n := len(got)
		mu.Unlock()
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	st := openStore(t, "")
	putPolicy(t, st, "p", fast(5))
	task, _, err := st.TaskCreate(context.Background(), &store.Task{
		Tenant: tenant, TargetURL: srv.URL + "/orders/7?x=1", Method: "PUT", Headers: map[string]string{"X-Order": "7"},
		Body: []byte(`{"amount":"9.99"}`), PolicyID: "p", RequestHash: "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := start(t, st, options{})
	s.Wake(store.Due{ID: task.ID, Version: task.Version})
	if done := waitFor(t, st, task.ID, terminal); done.Status != store.Succeeded || done.AttemptNumber != 3 {
		t.Fatalf("task = %s after %d attempts, want SUCCEEDED after 3", done.Status, done.AttemptNumber)
	}
	want := seen{"PUT", "/orders/7?x=1", "7", task.IdempotencyKey, `{"amount":"9.99"}`}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("target saw %d requests, want 3", len(got))
	}
	for i, g := range got {
		if g != want {
			t.Errorf("attempt %d sent %+v, want %+v", i+1, g, want)
		}
	}
}
