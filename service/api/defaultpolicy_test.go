package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
)

// policyIDs pages through GET /retry-policies with limit and returns the
// IDs listed, and which were marked builtin.
func policyIDs(t *testing.T, e *env, limit int) (ids []string, builtin []string) {
	t.Helper()
	token := ""
	for range 50 {
		path := fmt.Sprintf("/retry-policies?limit=%d", limit)
		if token != "" {
			path += "&pageToken=" + token
		}
		page := e.do(t, "GET", path, "").wantStatus(t, http.StatusOK)
		for _, it := range page["items"].([]any) {
			p := it.(map[string]any)
			ids = append(ids, p["policyId"].(string))
			if p["builtin"] == true {
				builtin = append(builtin, p["policyId"].(string))
			}
		}
		next, ok := page["nextPageToken"].(string)
		if !ok {
			return ids, builtin
		}
		token = next
	}
	t.Fatal("paging does not end")
	return nil, nil
}

func TestBuiltinDefaultPolicy(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		e := setup(t, options{backend: backend, tokens: true})

		// A task naming no policy, or "", follows "default", which the
		// tenant never registered: the built-in.
		task := e.createTask(t, `{"targetUrl":"http://h/1","idempotencyKey":"k1"}`)
		if task["policyId"] != "default" {
			t.Errorf("policyId = %v, want default", task["policyId"])
		}
		e.createTask(t, `{"targetUrl":"http://h/2","policyId":""}`)
		// So does each task of a batch.
		items := e.batchItems(t, `{"tasks":[{"targetUrl":"http://h/b"},{"targetUrl":"http://h/c","policyId":"nope"}]}`)
		if items[0]["status"] != 201.0 || items[0]["task"].(map[string]any)["policyId"] != "default" || items[1]["status"] != 400.0 {
			t.Errorf("batch = %v, want the first created under default, the second refused", items)
		}
		// Naming it is the same request as naming none.
		e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/1","idempotencyKey":"k1","policyId":"default"}`).wantStatus(t, http.StatusOK)

		got := e.do(t, "GET", "/retry-policies/default", "").wantStatus(t, http.StatusOK)
		want := map[string]any{
			"policyId": "default", "builtin": true, "backoff": "EXPONENTIAL", "initialDelayMs": 1000.0, "multiplier": 2.0,
			"maxDelayMs": 300000.0, "jitterType": "FULL", "maxAttempts": 10.0, "totalBudgetMs": 86400000.0,
			"retryableStatusCodes": []any{408.0, 425.0, 429.0, 500.0, 502.0, 503.0, 504.0},
		}
		for k, v := range want {
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("built-in %s = %v, want %v", k, got[k], v)
			}
		}

		// Listed in its place by ID: after "a" and "b" (in the gap before
		// the next page), before "x" and "y".
		for _, id := range []string{"a", "b", "x", "y"} {
			e.putPolicy(t, fmt.Sprintf(`{"policyId":%q}`, id))
		}
		for _, limit := range []int{1, 2, 3, 100} {
			ids, builtin := policyIDs(t, e, limit)
			if want := []string{"a", "b", "default", "x", "y"}; !reflect.DeepEqual(ids, want) || !reflect.DeepEqual(builtin, []string{"default"}) {
				t.Errorf("limit %d: policies %v (builtin %v), want %v with default builtin", limit, ids, builtin, want)
			}
		}

		// The tenant registers its own: it replaces the built-in, and is
		// immutable as any policy.
		e.do(t, "POST", "/retry-policies", `{"policyId":"default","maxAttempts":2}`).wantStatus(t, http.StatusCreated)
		got = e.do(t, "GET", "/retry-policies/default", "").wantStatus(t, http.StatusOK)
		if _, ok := got["builtin"]; ok || got["maxAttempts"] != 2.0 {
			t.Errorf("own default = %v, want maxAttempts 2 and no builtin", got)
		}
		e.do(t, "POST", "/retry-policies", `{"policyId":"default","maxAttempts":3}`).wantError(t, http.StatusConflict, "conflict", "policyId")
		if ids, builtin := policyIDs(t, e, 2); !reflect.DeepEqual(ids, []string{"a", "b", "default", "x", "y"}) || builtin != nil {
			t.Errorf("policies = %v (builtin %v), want the own default listed once, not builtin", ids, builtin)
		}

		// Another tenant still has the built-in.
		e.token = tokenB
		if got := e.do(t, "GET", "/retry-policies/default", "").wantStatus(t, http.StatusOK); got["builtin"] != true {
			t.Errorf("tenant b's default = %v, want the built-in", got)
		}
		if ids, builtin := policyIDs(t, e, 10); !reflect.DeepEqual(ids, []string{"default"}) || len(builtin) != 1 {
			t.Errorf("tenant b's policies = %v (builtin %v), want the built-in alone", ids, builtin)
		}
		e.createTask(t, `{"targetUrl":"http://h/3"}`)
		// A policy of another ID is not made up.
		e.do(t, "GET", "/retry-policies/other", "").wantError(t, http.StatusNotFound, "not_found", "")
		e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/4","policyId":"other"}`).wantError(t, http.StatusBadRequest, "unknown_policy", "policyId")
	})
}
