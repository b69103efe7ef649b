package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
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
	m := metrics.New(nil, nil, metrics.Limits{})
	ctx := context.Background()
	m.Observe(ctx, retry.Event{Outcome: retry.Retrying, Name: "p1", Attempt: 1, Duration: 3 * time.Millisecond})
	m.Observe(ctx, retry.Event{Outcome: retry.Retrying, Name: "p1", Attempt: 2, Duration: 2 * time.Second})
	m.Observe(ctx, retry.Event{Outcome: retry.Succeeded, Name: "p1", Attempt: 3, Duration: 4 * time.Millisecond})
	m.Lag("t", 3*time.Millisecond)
	m.Lag("t", -time.Second)
	m.Terminal(store.Succeeded, 2*time.Second)
	m.Terminal(store.Exhausted, time.Minute)
	got := scrape(t, m.Handler())
	for _, want := range []string{
		`retry_attempts_total{outcome="retry",policy="p1",tenant=""} 2`,
		`retry_attempts_total{outcome="succeeded",policy="p1",tenant=""} 1`,
		`retry_attempt_duration_seconds_count{outcome="retry"} 2`,
		`retry_attempt_duration_seconds_bucket{outcome="retry",le="0.005"} 1`,
		`retry_attempt_duration_seconds_bucket{outcome="retry",le="2.5"} 2`,
		`retry_attempt_duration_seconds_count{outcome="succeeded"} 1`,
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

// TestObserveLabels: every event is counted under the outcome label
// retry_attempts_total has always had for the task's state after it, so
// that dashboards read the same series, and under its tenant and policy.
func TestObserveLabels(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil, nil, metrics.Limits{})
	ctx := context.Background()
	for _, e := range []retry.Event{
		{Outcome: retry.Succeeded, Name: "a", Attempt: 1},
		{Outcome: retry.Retrying, Name: "a", Attempt: 1, Delay: time.Second},
		{Outcome: retry.GaveUp, Name: "a", Attempt: 3, Reason: retry.ErrAttemptsExhausted},
		{Outcome: retry.GaveUp, Name: "a", Attempt: 2, Reason: retry.ErrBudgetExhausted},
		{Outcome: retry.GaveUp, Name: "b", Attempt: 1, Reason: retry.ErrNotRetryable},
		{Outcome: retry.GaveUp, Name: "b", Attempt: 1, Reason: retry.ErrQuotaExhausted},
	} {
		m.ObserveTenant(ctx, "t", e)
	}
	m.LeaseLost("t", "b")
	got := scrape(t, m.Handler())
	for _, want := range []string{
		`retry_attempts_total{outcome="succeeded",policy="a",tenant="t"} 1`,
		`retry_attempts_total{outcome="retry",policy="a",tenant="t"} 1`,
		`retry_attempts_total{outcome="exhausted",policy="a",tenant="t"} 2`,
		`retry_attempts_total{outcome="failed",policy="b",tenant="t"} 1`,
		`retry_attempts_total{outcome="exhausted",policy="b",tenant="t"} 1`,
		`retry_attempts_total{outcome="lease_lost",policy="b",tenant="t"} 1`,
		`retry_attempt_duration_seconds_count{outcome="exhausted"} 3`,
		`retry_attempt_duration_seconds_count{outcome="failed"} 1`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(got, `retry_attempt_duration_seconds_count{outcome="lease_lost"}`) {
		t.Errorf("a lost lease timed as an attempt")
	}
	if n := strings.Count(got, "retry_attempts_total{"); n != 6 {
		t.Errorf("%d retry_attempts_total series, want 6:\n%s", n, got)
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Observe(context.Background(), retry.Event{Outcome: retry.GaveUp, Reason: retry.ErrNotRetryable})
	m.LeaseLost("t", "p")
	m.ObserveTenant(context.Background(), "t", retry.Event{Outcome: retry.Succeeded})
	m.Lag("t", time.Second)
	m.Terminal(store.Failed, time.Second)
	m.DestinationHeld("t", "d", "paused")
	m.DestinationInFlight("t", "d", 1)
	m.DestinationStatus("t", "d", "PAUSED")
}

func TestHealthy(t *testing.T) {
	t.Parallel()
	if got := scrape(t, metrics.Healthy()); got != "ok\n" {
		t.Fatalf("healthz = %q", got)
	}
}
