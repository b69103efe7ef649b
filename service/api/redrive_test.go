package api_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// claim leases the task as a scheduler would, through the store.
func claim(t *testing.T, st store.Store, id string) *store.Task {
	t.Helper()
	ts, err := st.TaskClaim(context.Background(), store.ClaimParams{Now: time.Now(), Lease: time.Minute, Limit: 1, IDs: []string{id}})
	if err != nil || len(ts) != 1 {
		t.Fatalf("TaskClaim(%s) = %v, %v; want the task", id, ts, err)
	}
	return ts[0]
}

// attempt records one failed attempt of the task, leaving it in status.
func attempt(t *testing.T, st store.Store, id string, status store.Status) {
	t.Helper()
	c := claim(t, st, id)
	now := time.Now()
	errs, err := st.TaskFinish(context.Background(), []store.Finish{{
		TaskID: id, Version: c.Version,
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, Duration: 12 * time.Millisecond,
			ResponseStatus: 503, ErrorMessage: "503 Service Unavailable", ResponseBody: "busy"},
		Status: status, NextAttemptAt: now, LastError: "503 Service Unavailable", LastStatus: 503, Now: now,
	}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish: %v %v", errs, err)
	}
}

func TestRedriveAndDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p","maxAttempts":3}`)
	e.putPolicy(t, `{"policyId":"q"}`)
	exhausted := e.createTask(t, `{"targetUrl":"http://h/1","policyId":"p","idempotencyKey":"k1"}`)["taskId"].(string)
	failed := e.createTask(t, `{"targetUrl":"http://h/2","policyId":"q"}`)["taskId"].(string)
	pending := e.createTask(t, `{"targetUrl":"http://h/3","policyId":"p"}`)["taskId"].(string)
	attempt(t, e.store, exhausted, store.Pending)
	attempt(t, e.store, exhausted, store.Pending)
	attempt(t, e.store, exhausted, store.Exhausted)
	attempt(t, e.store, failed, store.Failed)

	dead := e.do(t, "GET", "/dead-letters", "").wantStatus(t, http.StatusOK)
	if got, want := ids(dead), []string{failed, exhausted}; !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters = %v, want %v (newest first)", got, want)
	}
	dead = e.do(t, "GET", "/dead-letters?policyId=p", "").wantStatus(t, http.StatusOK)
	if got, want := ids(dead), []string{exhausted}; !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters of p = %v, want %v", got, want)
	}
	e.do(t, "GET", "/dead-letters?status=PENDING", "").wantError(t, http.StatusBadRequest, "invalid_request", "status")

	task := e.do(t, "GET", "/retry-tasks/"+exhausted, "").wantStatus(t, http.StatusOK)
	if task["status"] != "EXHAUSTED" || task["attemptNumber"] != 3.0 || task["lastError"] != "503 Service Unavailable" || task["lastResponseStatus"] != 503.0 {
		t.Errorf("exhausted task = %v", task)
	}

	e.do(t, "POST", "/retry-tasks/"+pending+"/redrive", "").wantError(t, http.StatusConflict, "conflict", "")
	e.do(t, "POST", "/retry-tasks/"+store.NewID()+"/redrive", "").wantError(t, http.StatusNotFound, "not_found", "")
	red := e.do(t, "POST", "/retry-tasks/"+exhausted+"/redrive", "").wantStatus(t, http.StatusOK)
	if red["status"] != "PENDING" || red["attemptNumber"] != 0.0 || red["idempotencyKey"] != "k1" {
		t.Errorf("redriven task = %v, want PENDING with 0 attempts and key k1", red)
	}
	if _, ok := red["lastError"]; ok {
		t.Errorf("redriven task kept lastError %v", red["lastError"])
	}
	e.do(t, "POST", "/retry-tasks/"+exhausted+"/redrive", "").wantError(t, http.StatusConflict, "conflict", "")
	dead = e.do(t, "GET", "/dead-letters", "").wantStatus(t, http.StatusOK)
	if got, want := ids(dead), []string{failed}; !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters after the redrive = %v, want %v", got, want)
	}

	// The attempt log survives the redrive, oldest first, one page at a time.
	page1 := e.do(t, "GET", "/retry-tasks/"+exhausted+"/attempts?limit=2", "").wantStatus(t, http.StatusOK)
	items := page1["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("first page = %v, want 2 attempts", items)
	}
	a := items[0].(map[string]any)
	for k, want := range map[string]any{"taskId": exhausted, "attemptNumber": 1.0, "durationMs": 12.0,
		"responseStatus": 503.0, "errorMessage": "503 Service Unavailable", "responseBody": "busy"} {
		if a[k] != want {
			t.Errorf("attempt %s = %v, want %v", k, a[k], want)
		}
	}
	page2 := e.do(t, "GET", "/retry-tasks/"+exhausted+"/attempts?limit=2&pageToken="+page1["nextPageToken"].(string), "").
		wantStatus(t, http.StatusOK)
	if items := page2["items"].([]any); len(items) != 1 || items[0].(map[string]any)["attemptNumber"] != 3.0 {
		t.Errorf("second page = %v, want attempt 3 alone", items)
	}
	if _, ok := page2["nextPageToken"]; ok {
		t.Error("the last page has a nextPageToken")
	}
	e.do(t, "GET", "/retry-tasks/"+store.NewID()+"/attempts", "").wantError(t, http.StatusNotFound, "not_found", "")
	e.do(t, "GET", "/retry-tasks/"+exhausted+"/attempts?pageToken=garbage", "").wantError(t, http.StatusBadRequest, "invalid_request", "pageToken")
}

func ids(page map[string]any) []string {
	var out []string
	for _, it := range page["items"].([]any) {
		out = append(out, it.(map[string]any)["taskId"].(string))
	}
	return out
}
