package api_test

import (
	"math"
	"net/http"
	"testing"
)

// wantDelays checks a preview without jitter: every percentile of attempt
// i's wait is want[i], and every sample reached it.
func wantDelays(t *testing.T, as []map[string]any, want []float64) {
	t.Helper()
	if len(as) != len(want) {
		t.Fatalf("%d attempts, want %d: %v", len(as), len(want), as)
	}
	cum := 0.0
	for i, a := range as {
		cum += want[i]
		if a["reached"] != 1.0 {
			t.Errorf("attempt %d reached %v, want 1", i+1, a["reached"])
		}
		for _, p := range []string{"p5", "p50", "p95"} {
			if pct(a, "delayMs", p) != want[i] || pct(a, "cumulativeMs", p) != cum {
				t.Errorf("attempt %d %s: delay %v, cumulative %v; want %v, %v", i+1, p, pct(a, "delayMs", p), pct(a, "cumulativeMs", p), want[i], cum)
			}
		}
	}
}

func TestPolicyPreviewScheduleAndMaxDoublings(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	t.Run("a schedule, its last delay repeating", func(t *testing.T) {
		_, as := previewOf(t, e, `{"policy":{"backoff":"SCHEDULE","delaysMs":[1000,5000,30000,300000],"maxDelayMs":600000,"jitterType":"NONE","maxAttempts":7},"samples":20}`)
		wantDelays(t, as, []float64{0, 1000, 5000, 30000, 300000, 300000, 300000})
	})

	t.Run("a registered schedule, clamped", func(t *testing.T) {
		e.putPolicy(t, `{"policyId":"steps","backoff":"SCHEDULE","delaysMs":[100,5000,30000],"minDelayMs":500,"maxDelayMs":20000,"jitterType":"NONE","maxAttempts":5}`)
		_, as := previewOf(t, e, `{"policyId":"steps","samples":20}`)
		wantDelays(t, as, []float64{0, 500, 5000, 20000, 20000})
	})

	t.Run("a schedule with full jitter", func(t *testing.T) {
		_, as := previewOf(t, e, `{"policy":{"backoff":"SCHEDULE","delaysMs":[1000,8000],"maxAttempts":4}}`)
		for i, raw := range []float64{1000, 8000, 8000} {
			a := as[i+1]
			if p5, p50, p95 := pct(a, "delayMs", "p5"), pct(a, "delayMs", "p50"), pct(a, "delayMs", "p95"); p5 < 0 || p95 > raw || math.Abs(p50-raw/2) > 0.05*raw/2 {
				t.Errorf("attempt %d: %v %v %v, want within 0–%v, median near %v", i+2, p5, p50, p95, raw, raw/2)
			}
		}
	})

	t.Run("maxDoublings as Cloud Tasks", func(t *testing.T) {
		_, as := previewOf(t, e, `{"policy":{"initialDelayMs":10000,"maxDelayMs":300000,"maxDoublings":3,"jitterType":"NONE","maxAttempts":10},"samples":20}`)
		wantDelays(t, as, []float64{0, 10000, 20000, 40000, 80000, 160000, 240000, 300000, 300000, 300000})
	})

	t.Run("a registered maxDoublings", func(t *testing.T) {
		e.putPolicy(t, `{"policyId":"linear-after-two","initialDelayMs":1000,"multiplier":3,"maxDoublings":2,"maxDelayMs":0,"jitterType":"NONE","maxAttempts":6}`)
		_, as := previewOf(t, e, `{"policyId":"linear-after-two","samples":20}`)
		wantDelays(t, as, []float64{0, 1000, 3000, 9000, 18000, 27000})
	})

	for _, tc := range []struct{ name, body, field string }{
		{"a schedule without delays", `{"policy":{"backoff":"SCHEDULE"}}`, "policy.delaysMs"},
		{"a negative delay", `{"policy":{"backoff":"SCHEDULE","delaysMs":[-5]}}`, "policy.delaysMs"},
		{"a negative maxDoublings", `{"policy":{"maxDoublings":-3}}`, "policy.maxDoublings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do(t, "POST", "/retry-policies/preview", tc.body).wantError(t, http.StatusBadRequest, "invalid_request", tc.field)
		})
	}
}
