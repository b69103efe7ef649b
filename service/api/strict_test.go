package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStrictJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, options{maxBody: 256})
	e.putPolicy(t, `{"policyId":"p"}`)
	task := `{"targetUrl":"http://example.com/","policyId":"p"}`
	tests := []struct {
		name, body string
		header     map[string]string
		status     int
		code       string
		field      string
	}{
		{name: "empty body", body: " ", status: 400, code: "invalid_request"},
		{name: "null", body: "null", status: 400, code: "invalid_request"},
		{name: "array", body: "[" + task + "]", status: 400, code: "invalid_request"},
		{name: "string", body: `"x"`, status: 400, code: "invalid_request"},
		{name: "two objects", body: task + task, status: 400, code: "invalid_request"},
		{name: "trailing garbage", body: task + " x", status: 400, code: "invalid_request"},
		{name: "cut short", body: task[:20], status: 400, code: "invalid_request"},
		{name: "repeated key", body: `{"targetUrl":"http://a/","targetUrl":"http://b/","policyId":"p"}`, status: 400, code: "invalid_request", field: "targetUrl"},
		{name: "repeated nested key", body: `{"targetUrl":"http://a/","policyId":"p","headers":{"X":"1","X":"2"}}`, status: 400, code: "invalid_request", field: "X"},
		{name: "invalid UTF-8", body: "{\"targetUrl\":\"http://a/\",\"policyId\":\"p\",\"body\":\"\xff\"}", status: 400, code: "invalid_request"},
		{name: "unknown field", body: `{"targetUrl":"http://a/","policyId":"p","retries":3}`, status: 400, code: "invalid_request", field: "retries"},
		{name: "field in the wrong case", body: `{"targetURL":"http://a/","policyId":"p"}`, status: 400, code: "invalid_request", field: "targetURL"},
		{name: "form content type", body: task, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415, code: "unsupported_media_type"},
		{name: "bad content type", body: task, header: map[string]string{"Content-Type": ";;"}, status: 415, code: "unsupported_media_type"},
		{name: "too large", body: `{"targetUrl":"http://a/","policyId":"p","body":"` + strings.Repeat("x", 300) + `"}`, status: 413, code: "body_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"/retry-tasks", "/retry-policies"} {
				field := tc.field
				if path == "/retry-policies" && tc.field != "" && tc.field != "X" {
					continue // the field names are the task's
				}
				e.doWith(t, "POST", path, tc.body, tc.header).wantError(t, tc.status, tc.code, field)
			}
		})
	}
	// Nothing was stored by the refused requests.
	got := e.do(t, "GET", "/retry-tasks", "").wantStatus(t, http.StatusOK)
	if items := got["items"].([]any); len(items) != 0 {
		t.Errorf("tasks after refused requests = %v, want none", items)
	}
}

// A body over the limit is refused while it is read, when no Content-Length
// announced it.
func TestTooLargeChunked(t *testing.T) {
	t.Parallel()
	e := setup(t, options{maxBody: 1024})
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"policyId":"p","x":"`))
		for range 100 {
			if _, err := pw.Write([]byte(strings.Repeat("y", 100))); err != nil {
				break
			}
		}
		pw.Write([]byte(`"}`))
		pw.Close()
	}()
	req, err := http.NewRequest("POST", e.srv.URL+"/retry-policies", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusRequestEntityTooLarge; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if resp.ContentLength == 0 {
		t.Error("no error body")
	}
}

func TestUnroutedAnswersJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	tests := []struct {
		name, method, path string
		status             int
		code, allow        string
	}{
		{"unknown path", "GET", "/nothing-here", 404, "not_found", ""},
		{"trailing slash", "GET", "/retry-tasks/", 404, "not_found", ""},
		{"wrong method", "PUT", "/retry-policies", 405, "method_not_allowed", "GET, HEAD, POST"},
		{"delete a policy", "DELETE", "/retry-policies/p", 405, "method_not_allowed", "GET, HEAD"},
		{"GET redrive", "GET", "/retry-tasks/x/redrive", 405, "method_not_allowed", "POST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := e.doWith(t, tc.method, tc.path, "", nil)
			r.wantError(t, tc.status, tc.code, "")
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
		})
	}
}
