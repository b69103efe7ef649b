package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/api"
)

// Requests found by trying to break retryd from outside (issue 13): each is
// answered with a JSON error, never net/http's plain text or HTML.

// noRedirects sends req as it is and returns the first answer, a redirect
// included, its body read.
func noRedirects(t *testing.T, req *http.Request) response {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// A path net/http.ServeMux would clean (and redirect, with an HTML body) is
// no route of the API: a JSON 404, from the API's handler alone and from a
// ServeMux the handler is mounted in, as retryd mounts it.
func TestUncleanPathIsJSON404(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	h, err := api.New(api.Config{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	mux.Handle("/", h)
	mounted := serveLocal(t, api.CanonicalPaths(mux))

	paths := []string{"//retry-tasks", "/retry-tasks//", "//retry-policies/p", "/./retry-tasks",
		"/retry-policies/../retry-tasks", "/retry-tasks/.", "/retry-tasks/x/..", "//healthz",
		"/retry-tasks/00000000-0000-0000-0000-000000000000//attempts"}
	for _, base := range []string{e.srv.URL, mounted} {
		for _, path := range paths {
			for _, method := range []string{"GET", "POST", "HEAD"} {
				req, err := http.NewRequest(method, base+path, strings.NewReader(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+tokenA)
				req.Header.Set("Content-Type", "application/json")
				r := noRedirects(t, req)
				if method == "HEAD" {
					if r.status != http.StatusNotFound || r.header.Get("Location") != "" {
						t.Errorf("HEAD %s: status %d, Location %q; want 404 and none", path, r.status, r.header.Get("Location"))
					}
					continue
				}
				if r.status != http.StatusNotFound {
					t.Errorf("%s %s (%s): status %d, want 404; Location %q; body %q", method, path, base, r.status, r.header.Get("Location"), r.body)
					continue
				}
				r.wantError(t, http.StatusNotFound, "not_found", "")
				if loc := r.header.Get("Location"); loc != "" {
					t.Errorf("%s %s: Location %q, want none", method, path, loc)
				}
			}
		}
	}
	// Clean paths still route, mounted or not.
	for _, base := range []string{e.srv.URL, mounted} {
		req, _ := http.NewRequest("GET", base+"/retry-tasks", nil)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		noRedirects(t, req).wantStatus(t, http.StatusOK)
	}
	if r := noRedirects(t, mustRequest(t, "GET", mounted+"/healthz")); r.status != 200 || string(r.body) != "ok" {
		t.Errorf("GET /healthz through CanonicalPaths = %d %q, want 200 ok", r.status, r.body)
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// serveLocal serves h on a real server on 127.0.0.1 for the test's life and
// returns its URL.
func serveLocal(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// rawExchange writes req on a new connection to addr and reads one answer.
func rawExchange(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(c, req) // the server may answer before it has read it all
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, b
}

// wantRawError checks an answer read off the wire: status, the JSON error
// shape and its code.
func wantRawError(t *testing.T, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d; body %q", what, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json; body %q", what, ct, body)
	}
	if cl := resp.Header.Get("Content-Length"); cl != fmt.Sprint(len(body)) {
		t.Errorf("%s: Content-Length %q for a body of %d bytes", what, cl, len(body))
	}
	var m struct {
		Error *api.APIError `json:"error"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Error == nil || m.Error.Code != code || m.Error.Message == "" {
		t.Errorf("%s: body %q is not a JSON error of code %q (%v)", what, body, code, err)
	}
}

// Headers over http.Server.MaxHeaderBytes are answered by net/http itself,
// before any handler: through api.Listener, in JSON. So are the other
// requests net/http cannot read. Other answers pass through unchanged, and
// a connection keeps serving requests.
func TestOversizedHeaderIsJSON431(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	h, err := api.New(api.Config{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, MaxHeaderBytes: 4 << 10, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(api.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	for _, size := range []int{8 << 10, 64 << 10, 2 << 20} {
		resp, body := rawExchange(t, addr, "GET /retry-tasks HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", size)+"\r\n\r\n")
		wantRawError(t, fmt.Sprintf("a %d-byte header", size), resp, body, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large")
	}
	// Through Go's own client too.
	req := mustRequest(t, "GET", "http://"+addr+"/retry-tasks")
	req.Header.Set("X-Big", strings.Repeat("b", 16<<10))
	if r := noRedirects(t, req); r.status != http.StatusRequestHeaderFieldsTooLarge || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("Go client, big header: %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}

	// What else net/http answers on its own is JSON too.
	resp, body := rawExchange(t, addr, "GET /retry-tasks HTTP/1.1\r\n\r\n") // no Host
	wantRawError(t, "no Host header", resp, body, http.StatusBadRequest, "invalid_request")
	resp, body = rawExchange(t, addr, "GET /retry-tasks HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
	wantRawError(t, "a malformed header", resp, body, http.StatusBadRequest, "invalid_request")
	resp, body = rawExchange(t, addr, "POST /retry-tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: zip\r\n\r\n")
	wantRawError(t, "an unknown transfer coding", resp, body, http.StatusNotImplemented, "invalid_request")
	resp, body = rawExchange(t, addr, "GET /retry-tasks HTTP/2.0\r\nHost: x\r\n\r\n")
	wantRawError(t, "HTTP/2.0 in plain text", resp, body, http.StatusHTTPVersionNotSupported, "invalid_request")

	// Handlers' answers pass through, on one kept-alive connection.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, want := range []int{200, 404, 200} {
		path := []string{"/retry-tasks", "/nothing", "/retry-policies"}[i]
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %q %q, want %d in JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"), b, want)
		}
	}
}

// A targetUrl's port is 1 to 65535, in a single create and in a batch alike.
func TestTargetURLPort(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	for _, u := range []string{"http://h:99999/", "http://h:65536/", "http://h:0/", "https://h:00/",
		"http://[::1]:70000/", "http://h:99999999999999999999/", "http://h:abc/", "http://h:-1/", "http://h:1e3/"} {
		body := fmt.Sprintf(`{"targetUrl":%q,"policyId":"p"}`, u)
		e.do(t, "POST", "/retry-tasks", body).wantError(t, http.StatusBadRequest, "invalid_request", "targetUrl")
		items := e.batchItems(t, `{"tasks":[`+body+`]}`)
		wantItemError(t, 0, items[0], http.StatusBadRequest, "invalid_request", "tasks[0].targetUrl")
	}
	for _, u := range []string{"http://h:1/", "http://h:65535/x", "https://[::1]:8443/", "http://h:080/", "http://h/"} {
		got := e.createTask(t, fmt.Sprintf(`{"targetUrl":%q,"policyId":"p"}`, u))
		if got["targetUrl"] != u {
			t.Errorf("targetUrl = %v, want %q", got["targetUrl"], u)
		}
	}
	if n := taskCount(t, e.store); n != 5 {
		t.Errorf("%d tasks stored, want the 5 accepted", n)
	}
}

// A task ID is a UUID, whatever the case of its hex digits: the owner
// reaches the task through every task endpoint in upper or mixed case.
func TestTaskIDCaseInsensitive(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	e.putPolicy(t, `{"policyId":"p"}`)
	id := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p"}`)["taskId"].(string)
	up := strings.ToUpper(id)
	mixed := strings.ToUpper(id[:18]) + id[18:]

	for _, v := range []string{up, mixed} {
		got := e.do(t, "GET", "/retry-tasks/"+v, "").wantStatus(t, http.StatusOK)
		if got["taskId"] != id {
			t.Errorf("GET %s: taskId %v, want %s", v, got["taskId"], id)
		}
		e.do(t, "GET", "/retry-tasks/"+v+"/attempts", "").wantStatus(t, http.StatusOK)
		// PENDING: no redrive, but found.
		e.do(t, "POST", "/retry-tasks/"+v+"/redrive", "").wantError(t, http.StatusConflict, "conflict", "")
	}
	got := e.do(t, "DELETE", "/retry-tasks/"+up, "").wantStatus(t, http.StatusOK)
	if got["status"] != "CANCELLED" || got["taskId"] != id {
		t.Errorf("DELETE upper case: %v, want %s CANCELLED", got, id)
	}
	// Still another tenant's task, in any case.
	e.token = tokenB
	e.do(t, "GET", "/retry-tasks/"+up, "").wantError(t, http.StatusNotFound, "not_found", "")
	e.do(t, "GET", "/retry-tasks/"+up+"/attempts", "").wantError(t, http.StatusNotFound, "not_found", "")
}

// A query string net/url cannot read is refused, not read in part, on
// every endpoint that reads a query.
func TestMalformedQuery(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	id := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p"}`)["taskId"].(string)
	for _, path := range []string{"/retry-tasks", "/dead-letters", "/retry-policies", "/retry-tasks/" + id + "/attempts"} {
		for _, q := range []string{"limit=1&%zz", "%zz", "limit=%zz", "limit=1&pageToken=%", "limit=1;x=2"} {
			e.do(t, "GET", path+"?"+q, "").wantError(t, http.StatusBadRequest, "invalid_request", "query")
		}
		e.do(t, "GET", path+"?limit=1&", "").wantStatus(t, http.StatusOK)
	}
}

// A \u escape of a lone UTF-16 surrogate is no character: refused as
// invalid UTF-8 is, in every body, naming the member it is in. encoding/json
// would have made it U+FFFD without a word.
func TestLoneSurrogateEscape(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	lone := []string{`\ud800`, `\uDC00`, `x\udbffy`, `\ud800\u0041`, `\ud800\ud800`, `\udfff\ud800`, `\\\ud800`, `\ud83d\ude00\ud83d`}
	for _, s := range lone {
		e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"p","body":"`+s+`"}`).
			wantError(t, http.StatusBadRequest, "invalid_request", "body")
		e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"p","headers":{"X-A":"1","X-B":"`+s+`"}}`).
			wantError(t, http.StatusBadRequest, "invalid_request", "X-B")
		e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"p","x`+s+`":1}`).
			wantError(t, http.StatusBadRequest, "invalid_request", "")
		items := e.batchItems(t, `{"tasks":[{"targetUrl":"http://h/","policyId":"p"},{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"k`+s+`"}]}`)
		wantItemTask(t, 0, items[0], http.StatusCreated)
		wantItemError(t, 1, items[1], http.StatusBadRequest, "invalid_request", "tasks[1].idempotencyKey")
		for _, body := range []string{`{"policyId":"q","backoff":"FIXED` + s + `"}`, `{"policyId":"q","retryableStatusCodes":[500],"jitterType":"` + s + `NONE"}`} {
			m := e.do(t, "POST", "/retry-policies", body).wantStatus(t, http.StatusBadRequest)
			if msg, _ := m["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "surrogate") {
				t.Errorf("policy %s: message %q does not say why", body, msg)
			}
		}
	}
	// Pairs, escaped backslashes and the replacement character itself are
	// fine.
	for _, s := range []string{`\ud83d\ude00`, `\\ud800`, `\ufffd`, `\\\\ud800`, `\u00e9\uD83D\uDE00`} {
		got := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p","body":"`+s+`"}`)
		var want string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
			t.Fatal(err)
		}
		if got["body"] != want {
			t.Errorf("body %s stored as %q, want %q", s, got["body"], want)
		}
	}
	// The refused requests left nothing but the batches' good tasks.
	if n := taskCount(t, e.store); n != int64(len(lone)+5) {
		t.Errorf("%d tasks stored, want %d", n, len(lone)+5)
	}
}
