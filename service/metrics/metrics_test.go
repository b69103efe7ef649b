package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMetricsRecords(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil)
	m.Attempt(metrics.OutcomeRetry, "p1")
	m.Attempt(metrics.OutcomeRetry, "p1")
	m.Attempt(metrics.OutcomeSucceeded, "p1")
	m.Lag(3 * time.Millisecond)
	m.Lag(-time.Second)
	m.Terminal(store.Succeeded, 2*time.Second)
	m.Terminal(store.Exhausted, time.Minute)
	got := scrape(t, m.Handler())
	for _, want := range []string{
		`retry_attempts_total{outcome="retry",policy="p1"} 2`,
		`retry_attempts_total{outcome="succeeded",policy="p1"} 1`,
		`retry_dispatch_lag_seconds_count 2`,
		`retry_dispatch_lag_seconds_bucket{le="0.0005"} 1`,
		`retry_dispatch_lag_seconds_bucket{le="0.005"} 2`,
		`retry_task_age_seconds_count{status="SUCCEEDED"} 1`,
		`retry_task_age_seconds_count{status="EXHAUSTED"} 1`,
		`retry_dead_lettered_total{status="EXHAUSTED"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(got, want+"\n") && !strings.Contains(got, want+" ") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(got, `retry_dead_lettered_total{status="SUCCEEDED"}`) {
		t.Errorf("a success counted as a dead letter")
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Attempt(metrics.OutcomeFailed, "p")
	m.Lag(time.Second)
	m.Terminal(store.Failed, time.Second)
}

func TestHealthy(t *testing.T) {
	t.Parallel()
	if got := scrape(t, metrics.Healthy()); got != "ok\n" {
		t.Fatalf("healthz = %q", got)
	}
}
