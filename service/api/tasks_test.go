package api_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"github.com/retrykit/retry/service/store"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTaskCreate(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	before := time.Now().UnixMilli()
	got := e.createTask(t, `{"targetUrl":"https://example.com/hook?a=1","method":"put",
		"headers":{"x-trace":"abc","content-type":"application/json"},"body":"{\"n\":1}","policyId":"p"}`)

	if !store.IsID(got["taskId"].(string)) {
		t.Errorf("taskId %v is not a UUID", got["taskId"])
	}
	if !store.IsID(got["idempotencyKey"].(string)) {
		t.Errorf("generated idempotencyKey %v is not a UUID", got["idempotencyKey"])
	}
	created := int64(got["createdAt"].(float64))
	if created < before || created > time.Now().UnixMilli() {
		t.Errorf("createdAt = %d, want between %d and now", created, before)
	}
	if got["nextAttemptAt"] != got["createdAt"] {
		t.Errorf("nextAttemptAt = %v, want createdAt %v (due at once)", got["nextAttemptAt"], got["createdAt"])
	}
	for k, want := range map[string]any{
		"targetUrl": "https://example.com/hook?a=1", "method": "PUT", "body": `{"n":1}`, "policyId": "p",
		"status": "PENDING", "attemptNumber": 0.0,
		"headers": map[string]any{"X-Trace": "abc", "Content-Type": "application/json"},
	} {
		if !reflect.DeepEqual(got[k], want) {
			t.Errorf("%s = %#v, want %#v", k, got[k], want)
		}
	}
	for _, absent := range []string{"bodyBase64", "lastError", "finishedAt"} {
		if v, ok := got[absent]; ok {
			t.Errorf("%s = %v, want it absent", absent, v)
		}
	}

	// GET answers the same task.
	again := e.do(t, "GET", "/retry-tasks/"+got["taskId"].(string), "").wantStatus(t, http.StatusOK)
	if !reflect.DeepEqual(again, got) {
		t.Errorf("GET = %v\nwant %v", again, got)
	}
}

func TestTaskCreateBinaryBody(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	raw := []byte{0, 1, 0xfe, 0xff, '\n'}
	enc := base64.StdEncoding.EncodeToString(raw)
	got := e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/","policyId":"p","bodyBase64":%q}`, enc))
	if got["bodyBase64"] != enc {
		t.Errorf("bodyBase64 = %v, want %q", got["bodyBase64"], enc)
	}
	if _, ok := got["body"]; ok {
		t.Errorf("body = %v, want it absent for a binary body", got["body"])
	}
	if got["method"] != "POST" {
		t.Errorf("method = %v, want the default POST", got["method"])
	}
	st, err := e.store.TaskGet(context.Background(), "default", got["taskId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Body) != string(raw) {
		t.Errorf("stored body = %q, want %q", st.Body, raw)
	}
}

func TestTaskCreateInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	// with builds a body from a valid one, changing the given members.
	with := func(members string) string {
		if members == "" {
			return `{"targetUrl":"http://example.com/","policyId":"p"}`
		}
		return `{"targetUrl":"http://example.com/","policyId":"p",` + members + `}`
	}
	tests := []struct {
		name, body, code, field string
	}{
		{"no targetUrl", `{"policyId":"p"}`, "invalid_request", "targetUrl"},
		{"targetUrl not a string", `{"targetUrl":5,"policyId":"p"}`, "invalid_request", "targetUrl"},
		{"ftp URL", `{"targetUrl":"ftp://example.com/f","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"relative URL", `{"targetUrl":"/hook","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"no host", `{"targetUrl":"http:///hook","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"opaque URL", `{"targetUrl":"http:example.com","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"port only", `{"targetUrl":"http://:80/","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"space in host", `{"targetUrl":"http://exa mple.com/","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"bad port", `{"targetUrl":"http://example.com:http/","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"control character", `{"targetUrl":"http://example.com/\u0000","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"URL too long", `{"targetUrl":"http://example.com/` + strings.Repeat("a", 9000) + `","policyId":"p"}`, "invalid_request", "targetUrl"},
		{"unknown method", with(`"method":"FETCH"`), "invalid_request", "method"},
		{"method with a space", with(`"method":"GE T"`), "invalid_request", "method"},
		{"empty method", with(`"method":""`), "invalid_request", "method"},
		{"CONNECT", with(`"method":"CONNECT"`), "invalid_request", "method"},
		{"headers not an object", with(`"headers":["a"]`), "invalid_request", "headers"},
		{"header value not a string", with(`"headers":{"X-A":1}`), "invalid_request", "headers"},
		{"header name with a space", with(`"headers":{"X A":"1"}`), "invalid_request", "headers"},
		{"header name with a colon", with(`"headers":{"X:A":"1"}`), "invalid_request", "headers"},
		{"empty header name", with(`"headers":{"":"1"}`), "invalid_request", "headers"},
		{"CRLF in a value", with(`"headers":{"X-A":"1\r\nX-B: 2"}`), "invalid_request", "headers"},
		{"NUL in a value", with(`"headers":{"X-A":"1\u0000"}`), "invalid_request", "headers"},
		{"Idempotency-Key header", with(`"headers":{"idempotency-key":"k"}`), "invalid_request", "headers"},
		{"Host header", with(`"headers":{"Host":"evil"}`), "invalid_request", "headers"},
		{"Content-Length header", with(`"headers":{"Content-Length":"5"}`), "invalid_request", "headers"},
		{"header twice", with(`"headers":{"x-a":"1","X-A":"2"}`), "invalid_request", "headers"},
		{"body and bodyBase64", with(`"body":"a","bodyBase64":"YQ=="`), "invalid_request", "bodyBase64"},
		{"bad base64", with(`"bodyBase64":"not base64!"`), "invalid_request", "bodyBase64"},
		{"unpadded base64", with(`"bodyBase64":"YQ"`), "invalid_request", "bodyBase64"},
		{"body not a string", with(`"body":{"a":1}`), "invalid_request", "body"},
		{"policyId not a string", `{"targetUrl":"http://example.com/","policyId":7}`, "invalid_request", "policyId"},
		{"bad policyId", `{"targetUrl":"http://example.com/","policyId":"a b"}`, "invalid_request", "policyId"},
		{"unknown policyId", `{"targetUrl":"http://example.com/","policyId":"nope"}`, "unknown_policy", "policyId"},
		{"empty idempotencyKey", with(`"idempotencyKey":""`), "invalid_request", "idempotencyKey"},
		{"idempotencyKey with a space", with(`"idempotencyKey":"a b"`), "invalid_request", "idempotencyKey"},
		{"idempotencyKey with a newline", with(`"idempotencyKey":"a\nb"`), "invalid_request", "idempotencyKey"},
		{"idempotencyKey too long", with(`"idempotencyKey":"` + strings.Repeat("k", 256) + `"`), "invalid_request", "idempotencyKey"},
		{"unknown field", with(`"delayMs":5`), "invalid_request", "delayMs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e.do(t, "POST", "/retry-tasks", tc.body).wantError(t, http.StatusBadRequest, tc.code, tc.field)
		})
	}
	got := e.do(t, "GET", "/retry-tasks", "").wantStatus(t, http.StatusOK)
	if items := got["items"].([]any); len(items) != 0 {
		t.Errorf("tasks after refused requests = %d, want none", len(items))
	}
}

func TestTaskCreateIdempotency(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	e.putPolicy(t, `{"policyId":"q"}`)
	body := `{"targetUrl":"http://h/x","policyId":"p","idempotencyKey":"order-42","headers":{"X-A":"1"},"body":"hi"}`
	first := e.createTask(t, body)

	tests := []struct {
		name, body string
		status     int
	}{
		{"the same request", body, http.StatusOK},
		{"the same request, spelt differently",
			`{"idempotencyKey":"order-42","method":"post","headers":{"x-a":"1"},"bodyBase64":"aGk=","policyId":"p","targetUrl":"http://h/x"}`,
			http.StatusOK},
		{"another body", `{"targetUrl":"http://h/x","policyId":"p","idempotencyKey":"order-42","headers":{"X-A":"1"},"body":"ho"}`, http.StatusConflict},
		{"another URL", `{"targetUrl":"http://h/y","policyId":"p","idempotencyKey":"order-42","headers":{"X-A":"1"},"body":"hi"}`, http.StatusConflict},
		{"another method", `{"targetUrl":"http://h/x","method":"PUT","policyId":"p","idempotencyKey":"order-42","headers":{"X-A":"1"},"body":"hi"}`, http.StatusConflict},
		{"another header", `{"targetUrl":"http://h/x","policyId":"p","idempotencyKey":"order-42","headers":{"X-A":"2"},"body":"hi"}`, http.StatusConflict},
		{"another policy", `{"targetUrl":"http://h/x","policyId":"q","idempotencyKey":"order-42","headers":{"X-A":"1"},"body":"hi"}`, http.StatusConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.do(t, "POST", "/retry-tasks", tc.body)
			if tc.status == http.StatusConflict {
				r.wantError(t, http.StatusConflict, "conflict", "idempotencyKey")
				return
			}
			got := r.wantStatus(t, tc.status)
			if !reflect.DeepEqual(got, first) {
				t.Errorf("repeat = %v\nwant the first task %v", got, first)
			}
		})
	}
}

func TestTaskCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	id := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p"}`)["taskId"].(string)

	got := e.do(t, "DELETE", "/retry-tasks/"+id, "").wantStatus(t, http.StatusOK)
	if got["status"] != "CANCELLED" {
		t.Errorf("status = %v, want CANCELLED", got["status"])
	}
	if _, ok := got["finishedAt"]; !ok {
		t.Error("a cancelled task has no finishedAt")
	}
	if _, ok := got["nextAttemptAt"]; ok {
		t.Error("a cancelled task still has a nextAttemptAt")
	}
	e.do(t, "DELETE", "/retry-tasks/"+id, "").wantError(t, http.StatusConflict, "conflict", "")
	e.do(t, "DELETE", "/retry-tasks/"+store.NewID(), "").wantError(t, http.StatusNotFound, "not_found", "")
	e.do(t, "DELETE", "/retry-tasks/not-a-uuid", "").wantError(t, http.StatusNotFound, "not_found", "")
	e.do(t, "GET", "/retry-tasks/not-a-uuid", "").wantError(t, http.StatusNotFound, "not_found", "")

	// An attempt in flight cannot be called back.
	id2 := e.createTask(t, `{"targetUrl":"http://h/2","policyId":"p"}`)["taskId"].(string)
	claim(t, e.store, id2)
	msg := e.do(t, "DELETE", "/retry-tasks/"+id2, "").wantError(t, http.StatusConflict, "conflict", "")
	if !strings.Contains(msg["message"].(string), "IN_FLIGHT") {
		t.Errorf("message %q does not say the task is IN_FLIGHT", msg["message"])
	}
}

func TestTaskListFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	e.putPolicy(t, `{"policyId":"q"}`)
	var all, ofP []string // newest first
	for i := range 5 {
		policy := []string{"p", "q"}[i%2]
		id := e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/%d","policyId":%q}`, i, policy))["taskId"].(string)
		all = append([]string{id}, all...)
		if policy == "p" {
			ofP = append([]string{id}, ofP...)
		}
	}
	cancelled := all[0]
	e.do(t, "DELETE", "/retry-tasks/"+cancelled, "").wantStatus(t, http.StatusOK)

	collect := func(t *testing.T, query string) []string {
		var got []string
		token := ""
		for range 10 {
			path := "/retry-tasks?limit=2" + query
			if token != "" {
				path += "&pageToken=" + token
			}
			page := e.do(t, "GET", path, "").wantStatus(t, http.StatusOK)
			got = append(got, ids(page)...)
			next, ok := page["nextPageToken"].(string)
			if !ok {
				return got
			}
			token = next
		}
		t.Fatal("paging does not end")
		return nil
	}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"all", "", all},
		{"by policy", "&policyId=p", ofP},
		{"pending", "&status=PENDING", all[1:]},
		{"cancelled, lower case", "&status=cancelled", all[:1]},
		{"two states, comma", "&status=PENDING,CANCELLED", all},
		{"two states, repeated", "&status=PENDING&status=CANCELLED", all},
		{"none match", "&status=SUCCEEDED", nil},
		{"policy without tasks", "&policyId=zzz", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := collect(t, tc.query); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tasks = %v, want %v", got, tc.want)
			}
		})
	}

	bad := []struct{ name, query, field string }{
		{"unknown status", "?status=DONE", "status"},
		{"unknown parameter", "?state=PENDING", "state"},
		{"limit 0", "?limit=0", "limit"},
		{"limit too big", "?limit=1001", "limit"},
		{"limit not a number", "?limit=ten", "limit"},
		{"limit twice", "?limit=1&limit=2", "limit"},
		{"bad policyId", "?policyId=a%2Fb", "policyId"},
		{"forged page token", "?pageToken=Zm9vOmJhcg", "pageToken"},
		{"garbage page token", "?pageToken=%25%25%25", "pageToken"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e.do(t, "GET", "/retry-tasks"+tc.query, "").wantError(t, http.StatusBadRequest, "invalid_request", tc.field)
		})
	}
}

// A store that is gone answers 503, not a crash or a 500.
func TestStoreClosed(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.do(t, "GET", "/retry-tasks", "").wantError(t, http.StatusServiceUnavailable, "unavailable", "")
	e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"p"}`).wantError(t, http.StatusServiceUnavailable, "unavailable", "")
}
