package api_test

import (
	"math"
	"net/http"
	"testing"
)

// previewOf posts a preview and returns its attempts.
func previewOf(t *testing.T, e *env, body string) (map[string]any, []map[string]any) {
	t.Helper()
	got := e.do(t, "POST", "/retry-policies/preview", body).wantStatus(t, http.StatusOK)
	var out []map[string]any
	for _, a := range got["attempts"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return got, out
}

func pct(a map[string]any, which, p string) float64 {
	return a[which].(map[string]any)[p].(float64)
}

func TestPolicyPreview(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	t.Run("no jitter is exact", func(t *testing.T) {
		got, as := previewOf(t, e, `{"policy":{"backoff":"EXPONENTIAL","initialDelayMs":100,"maxDelayMs":350,"jitterType":"NONE","maxAttempts":5},"samples":50}`)
		if got["maxAttempts"] != 5.0 || got["samples"] != 50.0 || got["budgetMs"] != 0.0 || len(as) != 5 {
			t.Fatalf("preview = %v", got)
		}
		delays := []float64{0, 100, 200, 350, 350}
		cum := 0.0
		for i, a := range as {
			cum += delays[i]
			if a["attempt"] != float64(i+1) || a["reached"] != 1.0 {
				t.Errorf("attempt %d = %v", i+1, a)
			}
			for _, p := range []string{"p5", "p50", "p95"} {
				if pct(a, "delayMs", p) != delays[i] || pct(a, "cumulativeMs", p) != cum {
					t.Errorf("attempt %d %s: delay %v, cumulative %v; want %v, %v", i+1, p, pct(a, "delayMs", p), pct(a, "cumulativeMs", p), delays[i], cum)
				}
			}
		}
	})

	t.Run("full jitter's median is half the delay", func(t *testing.T) {
		_, as := previewOf(t, e, `{"policy":{"initialDelayMs":1000,"multiplier":2,"maxDelayMs":0,"jitterType":"FULL","maxAttempts":6}}`)
		for i, a := range as[1:] {
			raw := 1000 * math.Pow(2, float64(i))
			if p50 := pct(a, "delayMs", "p50"); math.Abs(p50-raw/2) > 0.05*raw/2 {
				t.Errorf("attempt %d: p50 %v, want %v within 5%%", i+2, p50, raw/2)
			}
			if p5, p95 := pct(a, "delayMs", "p5"), pct(a, "delayMs", "p95"); p5 < 0 || p95 > raw || p5 > 0.1*raw || p95 < 0.9*raw {
				t.Errorf("attempt %d: p5 %v, p95 %v; want near 5%% and 95%% of %v", i+2, p5, p95, raw)
			}
		}
	})

	t.Run("equal jitter stays in its half", func(t *testing.T) {
		_, as := previewOf(t, e, `{"policy":{"backoff":"FIXED","initialDelayMs":1000,"jitterType":"EQUAL","maxAttempts":3}}`)
		for _, a := range as[1:] {
			if p5, p50, p95 := pct(a, "delayMs", "p5"), pct(a, "delayMs", "p50"), pct(a, "delayMs", "p95"); p5 < 500 || p95 > 1000 || math.Abs(p50-750) > 0.05*750 {
				t.Errorf("attempt %v: %v %v %v, want within 500–1000, median 750", a["attempt"], p5, p50, p95)
			}
		}
	})

	t.Run("the budget cuts attempts off", func(t *testing.T) {
		// Waits of 1 s: attempt 4 starts at 3 s, and a fifth would end
		// past the 3.5 s budget.
		got, as := previewOf(t, e, `{"policy":{"backoff":"FIXED","initialDelayMs":1000,"jitterType":"NONE","maxAttempts":6,"totalBudgetMs":3500},"samples":10}`)
		if got["budgetMs"] != 3500.0 {
			t.Errorf("budgetMs = %v", got["budgetMs"])
		}
		for i, want := range []float64{1, 1, 1, 1, 0, 0} {
			if as[i]["reached"] != want {
				t.Errorf("attempt %d reached %v, want %v", i+1, as[i]["reached"], want)
			}
		}
		if d := as[4]["delayMs"].(map[string]any); d["p50"] != 0.0 {
			t.Errorf("an attempt never reached has delays %v, want zeros", d)
		}
		// With an expected call time of 500 ms, attempt 3 starts at 3 s
		// and the budget is spent when it ends.
		_, as = previewOf(t, e, `{"policy":{"backoff":"FIXED","initialDelayMs":1000,"jitterType":"NONE","maxAttempts":6,"totalBudgetMs":3500,"callTimeMs":500},"samples":10}`)
		for i, want := range []float64{1, 1, 1, 0, 0, 0} {
			if as[i]["reached"] != want {
				t.Errorf("with a call time: attempt %d reached %v, want %v", i+1, as[i]["reached"], want)
			}
		}
		// Jittered, the budget cuts some samples, not all.
		_, as = previewOf(t, e, `{"policy":{"backoff":"FIXED","initialDelayMs":1000,"jitterType":"FULL","maxAttempts":10,"totalBudgetMs":3000}}`)
		partly := false
		for _, a := range as {
			r := a["reached"].(float64)
			partly = partly || (r > 0 && r < 1)
		}
		if !partly {
			t.Errorf("no attempt reached by some samples only: %v", as)
		}
	})

	t.Run("by policyId", func(t *testing.T) {
		got, as := previewOf(t, e, `{"policyId":"default","samples":100}`)
		if got["maxAttempts"] != 10.0 || got["budgetMs"] != 86400000.0 || len(as) != 10 {
			t.Errorf("preview of the built-in = %v", got)
		}
		e.putPolicy(t, `{"policyId":"fixed","backoff":"FIXED","initialDelayMs":20,"jitterType":"NONE","maxAttempts":2}`)
		if _, as := previewOf(t, e, `{"policyId":"fixed"}`); len(as) != 2 || pct(as[1], "delayMs", "p95") != 20 {
			t.Errorf("preview of fixed = %v", as)
		}
	})

	t.Run("a preview is the same each time", func(t *testing.T) {
		body := `{"policy":{"jitterType":"DECORRELATED","maxAttempts":4},"samples":30}`
		a := e.do(t, "POST", "/retry-policies/preview", body).wantStatus(t, http.StatusOK)
		b := e.do(t, "POST", "/retry-policies/preview", body).wantStatus(t, http.StatusOK)
		if pct(a["attempts"].([]any)[3].(map[string]any), "delayMs", "p50") != pct(b["attempts"].([]any)[3].(map[string]any), "delayMs", "p50") {
			t.Error("two previews of one request differ")
		}
	})

	t.Run("many attempts take fewer samples", func(t *testing.T) {
		got, as := previewOf(t, e, `{"policy":{"backoff":"FIXED","initialDelayMs":1,"maxAttempts":5000},"samples":20000}`)
		if got["maxAttempts"] != 5000.0 || len(as) != 1000 || got["samples"] != 1000.0 {
			t.Errorf("preview of 5,000 attempts: maxAttempts %v, %d listed, %v samples; want 5000, 1000, 1000", got["maxAttempts"], len(as), got["samples"])
		}
	})

	for _, tc := range []struct{ name, body, code, field string }{
		{"neither", `{}`, "invalid_request", "policyId"},
		{"both", `{"policyId":"default","policy":{}}`, "invalid_request", "policy"},
		{"unknown policy", `{"policyId":"nope"}`, "unknown_policy", "policyId"},
		{"bad policyId", `{"policyId":"a b"}`, "invalid_request", "policyId"},
		{"bad setting", `{"policy":{"maxAttempts":0}}`, "invalid_request", "policy.maxAttempts"},
		{"unknown setting", `{"policy":{"maxRetries":3}}`, "invalid_request", "policy.maxRetries"},
		{"policy not an object", `{"policy":[1]}`, "invalid_request", "policy"},
		{"zero samples", `{"policyId":"default","samples":0}`, "invalid_request", "samples"},
		{"too many samples", `{"policyId":"default","samples":20001}`, "invalid_request", "samples"},
		{"unknown field", `{"policyId":"default","seed":1}`, "invalid_request", "seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do(t, "POST", "/retry-policies/preview", tc.body).wantError(t, http.StatusBadRequest, tc.code, tc.field)
		})
	}
}
