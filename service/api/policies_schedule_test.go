package api_test

import (
	"net/http"
	"reflect"
	"testing"
)

// TestPolicyPutSchedule: a SCHEDULE policy is stored with its delays and
// answered as registered, by POST and by GET.
func TestPolicyPutSchedule(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	body := `{"policyId":"steps","backoff":"SCHEDULE","delaysMs":[1000,5000,30000,300000],"maxDelayMs":600000,"jitterType":"NONE","maxAttempts":6}`
	first := e.do(t, "POST", "/retry-policies", body)
	got := first.wantStatus(t, http.StatusCreated)
	if got["backoff"] != "SCHEDULE" || !reflect.DeepEqual(got["delaysMs"], []any{1000.0, 5000.0, 30000.0, 300000.0}) {
		t.Errorf("created policy = %v, want SCHEDULE with its delays", got)
	}
	if _, ok := got["maxDoublings"]; ok {
		t.Errorf("a SCHEDULE answers maxDoublings: %v", got)
	}
	get := e.do(t, "GET", "/retry-policies/steps", "")
	get.wantStatus(t, http.StatusOK)
	if string(get.body) != string(first.body) {
		t.Errorf("GET = %s, want %s", get.body, first.body)
	}
	// The same schedule again is the same policy; another is a conflict.
	e.do(t, "POST", "/retry-policies", body).wantStatus(t, http.StatusOK)
	e.do(t, "POST", "/retry-policies", `{"policyId":"steps","backoff":"SCHEDULE","delaysMs":[1000,5000,30000],"maxDelayMs":600000,"jitterType":"NONE","maxAttempts":6}`).
		wantError(t, http.StatusConflict, "conflict", "policyId")
}

// TestPolicyPutMaxDoublings: maxDoublings is stored and answered; left at 0
// it is not answered, so policies without it read as they always did.
func TestPolicyPutMaxDoublings(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})

	first := e.do(t, "POST", "/retry-policies", `{"policyId":"tasks","initialDelayMs":10000,"maxDelayMs":300000,"maxDoublings":3,"maxAttempts":9}`)
	got := first.wantStatus(t, http.StatusCreated)
	if got["backoff"] != "EXPONENTIAL" || got["maxDoublings"] != 3.0 {
		t.Errorf("created policy = %v, want EXPONENTIAL with maxDoublings 3", got)
	}
	get := e.do(t, "GET", "/retry-policies/tasks", "")
	get.wantStatus(t, http.StatusOK)
	if string(get.body) != string(first.body) {
		t.Errorf("GET = %s, want %s", get.body, first.body)
	}
	e.do(t, "POST", "/retry-policies", `{"policyId":"tasks","initialDelayMs":10000,"maxDelayMs":300000,"maxDoublings":4,"maxAttempts":9}`).
		wantError(t, http.StatusConflict, "conflict", "policyId")

	got = e.do(t, "POST", "/retry-policies", `{"policyId":"unlimited","maxDoublings":0}`).wantStatus(t, http.StatusCreated)
	if _, ok := got["maxDoublings"]; ok {
		t.Errorf("maxDoublings 0 is answered: %v", got)
	}
}

func TestPolicyPutScheduleInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	for _, tc := range []struct{ name, body, field string }{
		{"schedule without delays", `{"policyId":"x","backoff":"SCHEDULE"}`, "delaysMs"},
		{"schedule of none", `{"policyId":"x","backoff":"SCHEDULE","delaysMs":[]}`, "delaysMs"},
		{"negative delay", `{"policyId":"x","backoff":"SCHEDULE","delaysMs":[1000,-1]}`, "delaysMs"},
		{"delays not a list", `{"policyId":"x","backoff":"SCHEDULE","delaysMs":"1s,5s"}`, "delaysMs"},
		{"delays of another backoff", `{"policyId":"x","backoff":"LINEAR","delaysMs":[1000]}`, "delaysMs"},
		{"negative maxDoublings", `{"policyId":"x","maxDoublings":-1}`, "maxDoublings"},
		{"maxDoublings of another backoff", `{"policyId":"x","backoff":"FIXED","maxDoublings":2}`, "maxDoublings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e.do(t, "POST", "/retry-policies", tc.body).wantError(t, http.StatusBadRequest, "invalid_request", tc.field)
		})
	}
}
