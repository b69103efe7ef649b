package scheduler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry/service/store"
)

// Every attempt tells the target its task, its number and when the first
// attempt of the task's run was due (its BudgetStart), over the task's own
// headers of those names.
func TestAttemptsTellTheTargetTheTaskAndAttempt(t *testing.T) {
	t.Parallel()
	type seen struct{ id, attempt, first string }
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Header.Get("Retrykit-Task-Id"), r.Header.Get("Retrykit-Attempt"), r.Header.Get("Retrykit-First-Attempt-At")})
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
		Tenant: tenant, TargetURL: srv.URL, Method: "POST", PolicyID: "p", RequestHash: "h",
		Headers: map[string]string{"Retrykit-Attempt": "forged"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := start(t, st, options{})
	s.Wake(store.Due{ID: task.ID, Version: task.Version})
	if done := waitFor(t, st, task.ID, terminal); done.Status != store.Succeeded || done.AttemptNumber != 3 {
		t.Fatalf("task = %s after %d attempts, want SUCCEEDED after 3", done.Status, done.AttemptNumber)
	}
	first := strconv.FormatInt(task.BudgetStart.UnixMilli(), 10)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("target saw %d requests, want 3", len(got))
	}
	for i, g := range got {
		if want := (seen{task.ID, strconv.Itoa(i + 1), first}); g != want {
			t.Errorf("attempt %d sent %+v, want %+v", i+1, g, want)
		}
	}
}

// A target's Retrykit-Retry: never ends the retries of a status the policy
// retries: FAILED after one attempt, saying why. On a success it changes
// nothing.
func TestTargetAsksForNoMoreRetries(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		want   store.Status
	}{
		{http.StatusServiceUnavailable, store.Failed},
		{http.StatusOK, store.Succeeded},
	} {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retrykit-Retry", "never")
				w.WriteHeader(tt.status)
			}))
			t.Cleanup(srv.Close)
			st := openStore(t, "")
			putPolicy(t, st, "p", fast(5))
			task, _, err := st.TaskCreate(context.Background(), &store.Task{
				Tenant: tenant, TargetURL: srv.URL, Method: "POST", PolicyID: "p", RequestHash: "h",
			})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := start(t, st, options{})
			s.Wake(store.Due{ID: task.ID, Version: task.Version})
			done := waitFor(t, st, task.ID, terminal)
			if done.Status != tt.want || done.AttemptNumber != 1 {
				t.Fatalf("task = %s after %d attempts (%q), want %s after 1", done.Status, done.AttemptNumber, done.LastError, tt.want)
			}
			if tt.want == store.Failed {
				if !strings.Contains(done.LastError, "HTTP 503") || !strings.Contains(done.LastError, "asked for no more retries") {
					t.Errorf("lastError = %q, want the status and the target's request", done.LastError)
				}
			}
			if n := len(attempts(t, st, task.ID)); n != 1 {
				t.Errorf("%d attempts logged, want 1", n)
			}
		})
	}
}
