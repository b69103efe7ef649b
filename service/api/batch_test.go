package api_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry/service/store"
)

// wakes records what the API tells the scheduler.
type wakes struct {
	mu  sync.Mutex
	got []store.Due
}

func (w *wakes) Wake(d store.Due) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, d)
}

// ids returns the IDs woken, in order.
func (w *wakes) ids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(w.got))
	for i, d := range w.got {
		out[i] = d.ID
	}
	return out
}

// batchItems posts a batch, wants 200 and returns its items.
func (e *env) batchItems(t *testing.T, body string) []map[string]any {
	t.Helper()
	got := e.do(t, "POST", "/retry-tasks/batch", body).wantStatus(t, http.StatusOK)
	raw, ok := got["items"].([]any)
	if !ok || len(got) != 1 {
		t.Fatalf("answer %v is not {\"items\": [...]}", got)
	}
	items := make([]map[string]any, len(raw))
	for i, it := range raw {
		items[i] = it.(map[string]any)
	}
	return items
}

// wantItemTask checks an accepted item: its status, a task and no error.
func wantItemTask(t *testing.T, i int, item map[string]any, status int) map[string]any {
	t.Helper()
	task, ok := item["task"].(map[string]any)
	if item["status"] != float64(status) || !ok || item["error"] != nil || len(item) != 2 {
		t.Fatalf("item %d = %v, want status %d with a task", i, item, status)
	}
	return task
}

// wantItemError checks a refused item: its status, code and field, and no task.
func wantItemError(t *testing.T, i int, item map[string]any, status int, code, field string) map[string]any {
	t.Helper()
	e, ok := item["error"].(map[string]any)
	if item["status"] != float64(status) || !ok || item["task"] != nil || len(item) != 2 {
		t.Fatalf("item %d = %v, want status %d with an error", i, item, status)
	}
	if e["code"] != code || e["field"] != field || e["message"] == "" {
		t.Errorf("item %d error = %v, want code %q field %q and a message", i, e, code, field)
	}
	return e
}

func taskCount(t *testing.T, st store.Store) int64 {
	t.Helper()
	counts, err := st.TaskCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// One batch holds every kind of answer, each as POST /retry-tasks would
// give it, and only the tasks it created wake the scheduler.
func TestTaskBatchAnswersPerItem(t *testing.T) {
	t.Parallel()
	w := &wakes{}
	e := setup(t, options{waker: w})
	e.putPolicy(t, `{"policyId":"p"}`)
	earlier := e.createTask(t, `{"targetUrl":"http://h/earlier","policyId":"p","idempotencyKey":"earlier"}`)
	w.mu.Lock()
	w.got = nil
	w.mu.Unlock()

	items := e.batchItems(t, `{"tasks":[
		{"targetUrl":"http://h/0","policyId":"p","idempotencyKey":"k0","headers":{"x-a":"1"},"body":"zero"},
		{"targetUrl":"http://h/earlier","policyId":"p","idempotencyKey":"earlier"},
		{"targetUrl":"http://h/other","policyId":"p","idempotencyKey":"earlier"},
		{"targetUrl":"ftp://h/3","policyId":"p"},
		{"targetUrl":"http://h/4","policyId":"nope"},
		5,
		{"targetUrl":"http://h/6","targetUrl":"http://h/6b","policyId":"p"},
		{"method":"FETCH","policyId":"a b"},
		{"targetUrl":"http://h/8","policyId":"p","method":"put","bodyBase64":"AAE="},
		{"policyId":"p","body":"zero","targetUrl":"http://h/0","headers":{"X-A":"1"},"idempotencyKey":"k0"},
		{"targetUrl":"http://h/0","policyId":"p","idempotencyKey":"k0","headers":{"x-a":"1"},"body":"one"},
		{"targetUrl":"http://h/11","policyId":"p","delayMs":5},
		null
	]}`)
	if len(items) != 13 {
		t.Fatalf("%d items, want 13", len(items))
	}
	created0 := wantItemTask(t, 0, items[0], http.StatusCreated)
	if created0["targetUrl"] != "http://h/0" || created0["body"] != "zero" || created0["idempotencyKey"] != "k0" ||
		created0["status"] != "PENDING" || !reflect.DeepEqual(created0["headers"], map[string]any{"X-A": "1"}) {
		t.Errorf("item 0 task = %v", created0)
	}
	if again := wantItemTask(t, 1, items[1], http.StatusOK); !reflect.DeepEqual(again, earlier) {
		t.Errorf("item 1 (a repeat of an earlier request) = %v\nwant the earlier task %v", again, earlier)
	}
	wantItemError(t, 2, items[2], http.StatusConflict, "conflict", "tasks[2].idempotencyKey")
	wantItemError(t, 3, items[3], http.StatusBadRequest, "invalid_request", "tasks[3].targetUrl")
	wantItemError(t, 4, items[4], http.StatusBadRequest, "unknown_policy", "tasks[4].policyId")
	wantItemError(t, 5, items[5], http.StatusBadRequest, "invalid_request", "tasks[5]")
	wantItemError(t, 6, items[6], http.StatusBadRequest, "invalid_request", "tasks[6].targetUrl")
	several := wantItemError(t, 7, items[7], http.StatusBadRequest, "invalid_request", "tasks[7].targetUrl")
	var fields []string
	for _, d := range several["details"].([]any) {
		fields = append(fields, d.(map[string]any)["field"].(string))
	}
	if want := []string{"tasks[7].targetUrl", "tasks[7].method", "tasks[7].policyId"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("item 7 details name %v, want %v", fields, want)
	}
	if msg := several["message"].(string); !strings.Contains(msg, "tasks[7].method: ") {
		t.Errorf("item 7 message %q does not name tasks[7].method", msg)
	}
	created8 := wantItemTask(t, 8, items[8], http.StatusCreated)
	if created8["method"] != "PUT" || created8["bodyBase64"] != "AAE=" || created8["idempotencyKey"] == "" {
		t.Errorf("item 8 task = %v", created8)
	}
	// A repeat of an earlier task of the same batch is that task.
	if again := wantItemTask(t, 9, items[9], http.StatusOK); !reflect.DeepEqual(again, created0) {
		t.Errorf("item 9 (a repeat of item 0) = %v\nwant %v", again, created0)
	}
	wantItemError(t, 10, items[10], http.StatusConflict, "conflict", "tasks[10].idempotencyKey")
	wantItemError(t, 11, items[11], http.StatusBadRequest, "invalid_request", "tasks[11].delayMs")
	wantItemError(t, 12, items[12], http.StatusBadRequest, "invalid_request", "tasks[12]")

	// The created tasks are stored as their items say.
	for _, created := range []map[string]any{created0, created8} {
		got := e.do(t, "GET", "/retry-tasks/"+created["taskId"].(string), "").wantStatus(t, http.StatusOK)
		if !reflect.DeepEqual(got, created) {
			t.Errorf("GET = %v\nwant the item's task %v", got, created)
		}
	}
	if n := taskCount(t, e.store); n != 3 {
		t.Errorf("%d tasks stored, want 3 (the earlier one and two created)", n)
	}
	if got, want := w.ids(), []string{created0["taskId"].(string), created8["taskId"].(string)}; !reflect.DeepEqual(got, want) {
		t.Errorf("woken %v, want only the created tasks %v", got, want)
	}
	for i, d := range w.got {
		if want := []map[string]any{created0, created8}[i]["nextAttemptAt"]; float64(d.At.UnixMilli()) != want || d.Version == 0 {
			t.Errorf("wake %d = %+v, want at nextAttemptAt %v with a version", i, d, want)
		}
	}
}

// A task of a batch is answered exactly as POST /retry-tasks answers it.
func TestTaskBatchItemIsTheSingleAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	bodies := []string{
		`{"targetUrl":"http://h/a","policyId":"p","idempotencyKey":"a","headers":{"content-type":"text/plain"},"body":"hi"}`,
		`{"targetUrl":"ftp://h/","method":"GE T","policyId":"p","body":"a","bodyBase64":"YQ=="}`,
		`{"targetUrl":"http://h/a","policyId":"p","idempotencyKey":"a","body":"other"}`,
		`{"targetUrl":"http://h/a","policyId":"zz"}`,
	}
	single := make([]response, len(bodies))
	for i, b := range bodies {
		single[i] = e.do(t, "POST", "/retry-tasks", b)
	}
	items := e.batchItems(t, `{"tasks":[`+strings.Join(bodies, ",")+`]}`)
	for i, item := range items {
		want := single[i].decode(t)
		if i == 0 { // created by the single call, repeated by the batch
			if single[i].status != http.StatusCreated || item["status"] != 200.0 || !reflect.DeepEqual(item["task"], want) {
				t.Errorf("item 0 = %v, want 200 and the task %v", item, want)
			}
			continue
		}
		we := want["error"].(map[string]any)
		ge, _ := item["error"].(map[string]any)
		if item["status"] != float64(single[i].status) || ge == nil || ge["code"] != we["code"] ||
			ge["field"] != fmt.Sprintf("tasks[%d].%s", i, we["field"]) || ndetails(ge) != ndetails(we) {
			t.Errorf("item %d = %v\nwant the single answer %d %v, fields prefixed", i, item, single[i].status, we)
		}
	}
}

func ndetails(e map[string]any) int {
	d, _ := e["details"].([]any)
	return len(d)
}

func TestTaskBatchThousand(t *testing.T) {
	t.Parallel()
	w := &wakes{}
	e := setup(t, options{waker: w})
	e.putPolicy(t, `{"policyId":"p"}`)
	batch := func(n int) string {
		tasks := make([]string, n)
		for i := range tasks {
			tasks[i] = fmt.Sprintf(`{"targetUrl":"http://h/%d","policyId":"p","body":"%s"}`, i, strings.Repeat("x", 1100))
		}
		return `{"tasks":[` + strings.Join(tasks, ",") + `]}`
	}
	body := batch(1000)
	if len(body) <= api1MiB {
		t.Fatalf("the batch is %d bytes; it should be over the single create's limit to show the batch has its own", len(body))
	}
	items := e.batchItems(t, body)
	if len(items) != 1000 {
		t.Fatalf("%d items, want 1000", len(items))
	}
	ids := make([]string, len(items))
	for i, item := range items {
		task := wantItemTask(t, i, item, http.StatusCreated)
		if task["targetUrl"] != fmt.Sprintf("http://h/%d", i) {
			t.Fatalf("item %d is the task of %v: items are not in request order", i, task["targetUrl"])
		}
		ids[i] = task["taskId"].(string)
	}
	if n := len(slices.Compact(slices.Sorted(slices.Values(ids)))); n != 1000 {
		t.Errorf("%d distinct task IDs, want 1000", n)
	}
	if n := taskCount(t, e.store); n != 1000 {
		t.Errorf("%d tasks stored, want 1000", n)
	}
	if got := w.ids(); !reflect.DeepEqual(got, ids) {
		t.Errorf("woken %d tasks, want the 1000 created, in order", len(got))
	}

	e.do(t, "POST", "/retry-tasks/batch", batch(1001)).wantError(t, http.StatusBadRequest, "invalid_request", "tasks")
	if n := taskCount(t, e.store); n != 1000 {
		t.Errorf("%d tasks stored after a refused batch of 1,001, want 1000", n)
	}
}

// api1MiB is the default limit of one create's body.
const api1MiB = 1 << 20

func TestTaskBatchRefusedWhole(t *testing.T) {
	t.Parallel()
	e := setup(t, options{maxBatchBody: 4096})
	e.putPolicy(t, `{"policyId":"p"}`)
	task := `{"targetUrl":"http://h/","policyId":"p"}`
	tests := []struct {
		name, body string
		header     map[string]string
		status     int
		code       string
		field      string
	}{
		{name: "empty body", body: " ", status: 400, code: "invalid_request"},
		{name: "null", body: "null", status: 400, code: "invalid_request"},
		{name: "an array of tasks", body: "[" + task + "]", status: 400, code: "invalid_request"},
		{name: "a task", body: task, status: 400, code: "invalid_request", field: "targetUrl"},
		{name: "no tasks", body: `{}`, status: 400, code: "invalid_request", field: "tasks"},
		{name: "tasks null", body: `{"tasks":null}`, status: 400, code: "invalid_request", field: "tasks"},
		{name: "tasks empty", body: `{"tasks":[]}`, status: 400, code: "invalid_request", field: "tasks"},
		{name: "tasks an object", body: `{"tasks":` + task + `}`, status: 400, code: "invalid_request", field: "tasks"},
		{name: "tasks a string", body: `{"tasks":"x"}`, status: 400, code: "invalid_request", field: "tasks"},
		{name: "tasks twice", body: `{"tasks":[` + task + `],"tasks":[` + task + `]}`, status: 400, code: "invalid_request", field: "tasks"},
		{name: "unknown member", body: `{"tasks":[` + task + `],"atomic":true}`, status: 400, code: "invalid_request", field: "atomic"},
		{name: "member in the wrong case", body: `{"Tasks":[` + task + `]}`, status: 400, code: "invalid_request", field: "Tasks"},
		{name: "two objects", body: `{"tasks":[` + task + `]}{}`, status: 400, code: "invalid_request"},
		{name: "trailing garbage", body: `{"tasks":[` + task + `]} x`, status: 400, code: "invalid_request"},
		{name: "cut short", body: `{"tasks":[` + task, status: 400, code: "invalid_request"},
		{name: "malformed task", body: `{"tasks":[{"targetUrl":}]}`, status: 400, code: "invalid_request"},
		{name: "invalid UTF-8", body: "{\"tasks\":[{\"targetUrl\":\"http://h/\",\"policyId\":\"p\",\"body\":\"\xff\"}]}", status: 400, code: "invalid_request"},
		{name: "form content type", body: `{"tasks":[` + task + `]}`, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415, code: "unsupported_media_type"},
		{name: "over the batch limit", body: `{"tasks":[` + strings.Repeat(task+",", 100) + task + `]}`, status: 413, code: "body_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e.doWith(t, "POST", "/retry-tasks/batch", tc.body, tc.header).wantError(t, tc.status, tc.code, tc.field)
		})
	}
	// Nothing was stored by the refused requests.
	t.Cleanup(func() {
		if n := taskCount(t, e.store); n != 0 {
			t.Errorf("%d tasks stored by refused batches, want none", n)
		}
	})
}

// Each task of a batch keeps the single create's size limit, while the
// batch as a whole has its own.
func TestTaskBatchItemSizeLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, options{maxBody: 256})
	e.putPolicy(t, `{"policyId":"p"}`)
	small := `{"targetUrl":"http://h/","policyId":"p"}`
	big := `{"targetUrl":"http://h/","policyId":"p","body":"` + strings.Repeat("x", 300) + `"}`
	items := e.batchItems(t, `{"tasks":[`+strings.Repeat(small+",", 9)+big+`]}`)
	for i, item := range items[:9] {
		wantItemTask(t, i, item, http.StatusCreated)
	}
	wantItemError(t, 9, items[9], http.StatusBadRequest, "invalid_request", "tasks[9]")
	e.do(t, "POST", "/retry-tasks", big).wantError(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
}

func TestTaskBatchAuthentication(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true})
	e.putPolicy(t, `{"policyId":"p"}`)
	body := `{"tasks":[{"targetUrl":"http://h/","policyId":"p"}]}`
	e.doWith(t, "POST", "/retry-tasks/batch", body, nil).wantError(t, http.StatusUnauthorized, "unauthorized", "")
	e.doWith(t, "POST", "/retry-tasks/batch", body, map[string]string{"Authorization": "Bearer not-a-token-0123456789"}).
		wantError(t, http.StatusUnauthorized, "unauthorized", "")

	// Tenant B has no policy p: tenant A's is not B's.
	b := *e
	b.token = tokenB
	wantItemError(t, 0, b.batchItems(t, body)[0], http.StatusBadRequest, "unknown_policy", "tasks[0].policyId")
	task := wantItemTask(t, 0, e.batchItems(t, body)[0], http.StatusCreated)
	b.do(t, "GET", "/retry-tasks/"+task["taskId"].(string), "").wantError(t, http.StatusNotFound, "not_found", "")
}

// Only the routes that exist answer: a GET of the batch path is a task
// lookup that finds nothing.
func TestTaskBatchRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.do(t, "GET", "/retry-tasks/batch", "").wantError(t, http.StatusNotFound, "not_found", "")
	r := e.do(t, "PUT", "/retry-tasks/batch", `{"tasks":[]}`)
	r.wantError(t, http.StatusMethodNotAllowed, "method_not_allowed", "")
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "POST") {
		t.Errorf("Allow = %q, want POST in it", allow)
	}
}
