package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestTaskGaugesReadTheStore(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	for i, key := range []string{"a", "b", "c"} {
		task, _, err := st.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: key, RequestHash: key,
			TargetURL: "http://example.test/", Method: "POST", PolicyID: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := st.TaskTransition(ctx, store.Transition{Tenant: "t", TaskID: task.ID,
				From: []store.Status{store.Pending}, To: store.Cancelled}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := scrape(t, metrics.New(st, nil, metrics.Limits{}).Handler())
	for _, want := range []string{
		`retry_tasks{status="PENDING"} 2`,
		`retry_tasks{status="CANCELLED"} 1`,
		`retry_tasks{status="SUCCEEDED"} 0`,
		`retry_dead_letters 0`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func TestReady(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	srv := httptest.NewServer(metrics.Ready(st))
	defer srv.Close()
	get := func() int {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(); got != http.StatusOK {
		t.Fatalf("readyz with an open store = %d, want 200", got)
	}
	st.Close()
	if got := get(); got != http.StatusServiceUnavailable {
		t.Fatalf("readyz with a closed store = %d, want 503", got)
	}
}

func TestGaugesLeftOutWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	st.Close()
	got := scrape(t, metrics.New(st, nil, metrics.Limits{}).Handler())
	if strings.Contains(got, "retry_tasks{") {
		t.Fatalf("scrape has task gauges from a closed store:\n%s", got)
	}
}
