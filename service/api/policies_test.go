package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/store"
)

func TestPolicyPutDefaultsAndIdempotence(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	first := e.do(t, "POST", "/retry-policies", `{"policyId":"p1","maxAttempts":5}`)
	got := first.wantStatus(t, http.StatusCreated)
	want := map[string]any{
		"policyId": "p1", "backoff": "EXPONENTIAL", "initialDelayMs": 100.0, "multiplier": 2.0,
		"incrementMs": 100.0, "minDelayMs": 0.0, "maxDelayMs": 30000.0, "jitterType": "FULL",
		"jitterFactor": 0.1, "maxAttempts": 5.0, "totalBudgetMs": 0.0, "callTimeMs": 0.0,
		"attemptTimeoutMs": 0.0, "maxRetryAfterMs": 300000.0,
		"retryableStatusCodes": []any{408.0, 425.0, 429.0, 500.0, 502.0, 503.0, 504.0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("created policy = %v\nwant %v", got, want)
	}

	// The same settings, spelt out or reordered, are the same policy.
	for _, body := range []string{
		`{"policyId":"p1","maxAttempts":5}`,
		`{"maxAttempts":5,"policyId":"p1","backoff":"EXPONENTIAL","jitterType":"FULL","maxDelayMs":30000}`,
		`{"policyId":"p1","maxAttempts":5,"multiplier":2,"jitterFactor":0.1,"incrementMs":100,"minDelayMs":0,"initialDelayMs":null}`,
	} {
		again := e.do(t, "POST", "/retry-policies", body)
		again.wantStatus(t, http.StatusOK)
		if string(again.body) != string(first.body) {
			t.Errorf("repeat %s answered %s, want the bytes of the first answer %s", body, again.body, first.body)
		}
	}

	e.do(t, "POST", "/retry-policies", `{"policyId":"p1","maxAttempts":6}`).
		wantError(t, http.StatusConflict, "conflict", "policyId")

	get := e.do(t, "GET", "/retry-policies/p1", "")
	get.wantStatus(t, http.StatusOK)
	if string(get.body) != string(first.body) {
		t.Errorf("GET = %s, want %s", get.body, first.body)
	}
	e.do(t, "GET", "/retry-policies/nope", "").wantError(t, http.StatusNotFound, "not_found", "")
	e.do(t, "GET", "/retry-policies/bad%20id", "").wantError(t, http.StatusNotFound, "not_found", "")
}

func TestPolicyPutInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	tests := []struct {
		name, body, field string
	}{
		{"missing policyId", `{"maxAttempts":3}`, "policyId"},
		{"policyId not a string", `{"policyId":7}`, "policyId"},
		{"policyId with a slash", `{"policyId":"a/b"}`, "policyId"},
		{"policyId too long", fmt.Sprintf(`{"policyId":"%0129d"}`, 0), "policyId"},
		{"unknown backoff", `{"policyId":"x","backoff":"CUBIC"}`, "backoff"},
		{"lower-case backoff", `{"policyId":"x","backoff":"fixed"}`, "backoff"},
		{"custom backoff", `{"policyId":"x","backoff":"CUSTOM"}`, "backoff"},
		{"negative delay", `{"policyId":"x","initialDelayMs":-1}`, "initialDelayMs"},
		{"delay as a string", `{"policyId":"x","maxDelayMs":"30s"}`, "maxDelayMs"},
		{"multiplier under 1", `{"policyId":"x","multiplier":0.5}`, "multiplier"},
		{"multiplier 0", `{"policyId":"x","multiplier":0}`, "multiplier"},
		{"jitter factor 0", `{"policyId":"x","jitterType":"PROPORTIONAL","jitterFactor":0}`, "jitterFactor"},
		{"min over the default max", `{"policyId":"x","minDelayMs":30001}`, "minDelayMs"},
		{"min over max", `{"policyId":"x","minDelayMs":50,"maxDelayMs":10}`, "minDelayMs"},
		{"jitter factor over 1", `{"policyId":"x","jitterFactor":2}`, "jitterFactor"},
		{"unknown jitter", `{"policyId":"x","jitterType":"RANDOM"}`, "jitterType"},
		{"zero attempts", `{"policyId":"x","maxAttempts":0}`, "maxAttempts"},
		{"fractional attempts", `{"policyId":"x","maxAttempts":2.5}`, "maxAttempts"},
		{"negative budget", `{"policyId":"x","totalBudgetMs":-5}`, "totalBudgetMs"},
		{"status code out of range", `{"policyId":"x","retryableStatusCodes":[503,99]}`, "retryableStatusCodes"},
		{"status codes not a list", `{"policyId":"x","retryableStatusCodes":503}`, "retryableStatusCodes"},
		{"unknown field", `{"policyId":"x","maxRetries":3}`, "maxRetries"},
		{"field in the wrong case", `{"policyId":"x","MaxAttempts":3}`, "MaxAttempts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e.do(t, "POST", "/retry-policies", tc.body).wantError(t, http.StatusBadRequest, "invalid_request", tc.field)
		})
	}
	// Nothing of a refused registration was stored: the built-in default
	// is all there is.
	got := e.do(t, "GET", "/retry-policies", "").wantStatus(t, http.StatusOK)
	if items := got["items"].([]any); len(items) != 1 || items[0].(map[string]any)["builtin"] != true {
		t.Errorf("policies after refused registrations = %v, want the built-in default alone", items)
	}
}

func TestPolicyPutListsEveryProblem(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	errObj := e.do(t, "POST", "/retry-policies", `{"policyId":"x","maxAttempts":0,"jitterType":"NOPE","extra":1}`).
		wantError(t, http.StatusBadRequest, "invalid_request", "maxAttempts")
	var got []string
	for _, d := range errObj["details"].([]any) {
		got = append(got, d.(map[string]any)["field"].(string))
	}
	want := []string{"maxAttempts", "extra", "jitterType"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("detail fields = %v, want %v", got, want)
	}
}

func TestPolicyListPages(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	want := []string{"default"} // the built-in, in its place by ID
	for i := range 5 {
		id := fmt.Sprintf("p%d", i)
		e.putPolicy(t, fmt.Sprintf(`{"policyId":%q}`, id))
		want = append(want, id)
	}
	var got []string
	token, pages := "", 0
	for {
		path := "/retry-policies?limit=2"
		if token != "" {
			path += "&pageToken=" + token
		}
		page := e.do(t, "GET", path, "").wantStatus(t, http.StatusOK)
		pages++
		for _, it := range page["items"].([]any) {
			got = append(got, it.(map[string]any)["policyId"].(string))
		}
		next, ok := page["nextPageToken"].(string)
		if !ok {
			break
		}
		if next == "" {
			t.Fatal("nextPageToken is present but empty; it must be absent on the last page")
		}
		token = next
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paged policies = %v, want %v", got, want)
	}
	if pages != 3 {
		t.Errorf("pages = %d, want 3", pages)
	}
}

// TestPolicyRegisteredByAnOlderRetryd: an older retryd encoded policies with
// fewer fields; registering the same settings again is still the same
// policy, not a conflict.
func TestPolicyRegisteredByAnOlderRetryd(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	old := `{"backoff":"EXPONENTIAL","initialDelayMs":100,"multiplier":2,"incrementMs":100,"minDelayMs":0,"maxDelayMs":30000,"jitterType":"FULL","jitterFactor":0.1,"maxAttempts":5,"totalBudgetMs":0,"retryableStatusCodes":[408,425,429,500,502,503,504]}`
	if _, _, err := e.store.PolicyPut(t.Context(), &store.Policy{Tenant: api.DefaultTenant, ID: "p1", Spec: []byte(old), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.do(t, "POST", "/retry-policies", `{"policyId":"p1","maxAttempts":5}`).wantStatus(t, http.StatusOK)
	e.do(t, "POST", "/retry-policies", `{"policyId":"p1","maxAttempts":6}`).wantStatus(t, http.StatusConflict)
}
