package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// fail records a failed attempt of the task, leaving it in status with the
// response status (0 for none) and error given.
func fail(t *testing.T, st store.Store, id string, status store.Status, code int, msg string) {
	t.Helper()
	c := claim(t, st, id)
	now := time.Now()
	errs, err := st.TaskFinish(context.Background(), []store.Finish{{
		TaskID: id, Version: c.Version,
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, ResponseStatus: code, ErrorMessage: msg},
		Status:  status, NextAttemptAt: now, LastError: msg, LastStatus: code, Now: now,
	}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish: %v %v", errs, err)
	}
}

// listAll pages through path (a list with a query string) and returns the
// task IDs in order, failing on a page over limit items.
func listAll(t *testing.T, e *env, path string, limit int) []string {
	t.Helper()
	var out []string
	token := ""
	for range 1000 {
		p := fmt.Sprintf("%s&limit=%d", path, limit)
		if token != "" {
			p += "&pageToken=" + url.QueryEscape(token)
		}
		page := e.do(t, "GET", p, "").wantStatus(t, http.StatusOK)
		items := page["items"].([]any)
		if len(items) > limit {
			t.Fatalf("%s: a page of %d items, over the limit %d", p, len(items), limit)
		}
		for _, it := range items {
			out = append(out, it.(map[string]any)["taskId"].(string))
		}
		next, ok := page["nextPageToken"].(string)
		if !ok {
			return out
		}
		token = next
	}
	t.Fatal("paging does not end")
	return nil
}

// deadSet is a set of tasks of known causes, newest first in each list.
type deadSet struct {
	http503, timeout, refused, pending []string // task IDs, newest first
	hostA                              []string // the tasks to a.example, newest first
}

// makeDeadSet creates, oldest first: 503s (FAILED and EXHAUSTED), timeouts
// and refusals, to two hosts, and pending tasks.
func makeDeadSet(t *testing.T, e *env) deadSet {
	t.Helper()
	e.putPolicy(t, `{"policyId":"p"}`)
	var d deadSet
	add := func(list *[]string, host string, then func(id string)) {
		id := e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://%s/x","policyId":"p"}`, host))["taskId"].(string)
		if then != nil {
			then(id)
		}
		*list = append([]string{id}, *list...)
		if host == "a.example" {
			d.hostA = append([]string{id}, d.hostA...)
		}
	}
	for i := range 5 {
		host := []string{"a.example", "B.example:8080"}[i%2]
		add(&d.http503, host, func(id string) {
			fail(t, e.st, id, []store.Status{store.Exhausted, store.Failed}[i%2], 503, "HTTP 503 Service Unavailable")
		})
		if i < 3 {
			add(&d.timeout, host, func(id string) { fail(t, e.st, id, store.Exhausted, 0, "context deadline exceeded") })
		}
		if i < 2 {
			add(&d.refused, "a.example", func(id string) {
				fail(t, e.st, id, store.Exhausted, 0, "dial tcp 192.0.2.1:80: connect: connection refused (attempts exhausted)")
			})
			add(&d.pending, "c.example", nil)
		}
	}
	return d
}

func TestTaskFilters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		e := setup(t, options{backend: backend})
		d := makeDeadSet(t, e)
		e.createTask(t, `{"targetUrl":"http://a.example:81/x","policyId":"p","idempotencyKey":"key-1"}`)

		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"/retry-tasks?cause=HTTP+503", d.http503},
			{"/retry-tasks?cause=timeout", d.timeout},
			{"/retry-tasks?cause=connection+refused", d.refused},
			{"/retry-tasks?cause=timeout&status=EXHAUSTED,PENDING", d.timeout},
			{"/retry-tasks?cause=HTTP+503&status=PENDING", nil},
			{"/retry-tasks?cause=DNS", nil},
			{"/dead-letters?cause=HTTP+503", d.http503},
			{"/retry-tasks?targetHost=c.example", d.pending},
			{"/retry-tasks?targetHost=b.EXAMPLE:8080&cause=timeout", []string{d.timeout[1]}},
			{"/dead-letters?targetHost=a.example&cause=HTTP+503", []string{d.http503[0], d.http503[2], d.http503[4]}},
		} {
			for _, limit := range []int{1, 2, 100} {
				if got := listAll(t, e, tc.query, limit); !slices.Equal(got, tc.want) {
					t.Errorf("%s, limit %d = %v, want %v", tc.query, limit, got, tc.want)
				}
			}
		}
		keyed := e.do(t, "GET", "/retry-tasks?idempotencyKey=key-1", "").wantStatus(t, http.StatusOK)["items"].([]any)
		if len(keyed) != 1 || keyed[0].(map[string]any)["idempotencyKey"] != "key-1" {
			t.Errorf("idempotencyKey=key-1 = %v, want its task", keyed)
		}
		if got := listAll(t, e, "/retry-tasks?targetHost=a.example", 3); !slices.Equal(got, d.hostA) {
			t.Errorf("targetHost=a.example = %v, want %v (not a.example:81)", got, d.hostA)
		}

		// Dead letters carry their cause; other tasks none.
		for _, it := range e.do(t, "GET", "/retry-tasks?limit=1000", "").wantStatus(t, http.StatusOK)["items"].([]any) {
			task := it.(map[string]any)
			want := map[string]string{"PENDING": ""}[task["status"].(string)]
			switch id := task["taskId"].(string); {
			case slices.Contains(d.http503, id):
				want = "HTTP 503"
			case slices.Contains(d.timeout, id):
				want = "timeout"
			case slices.Contains(d.refused, id):
				want = "connection refused"
			}
			if got, _ := task["cause"].(string); got != want {
				t.Errorf("task %v: cause %q, want %q", task["taskId"], got, want)
			}
		}

		for _, q := range []struct{ query, field string }{
			{"cause=HTTP+five", "cause"},
			{"cause=Timeout", "cause"},
			{"targetHost=a.example/x", "targetHost"},
			{"targetHost=user@a.example", "targetHost"},
			{"idempotencyKey=a+b", "idempotencyKey"},
			{"cause=timeout&cause=DNS", "cause"},
		} {
			e.do(t, "GET", "/retry-tasks?"+q.query, "").wantError(t, http.StatusBadRequest, "invalid_request", q.field)
		}
		e.do(t, "GET", "/dead-letters?idempotencyKey=k", "").wantError(t, http.StatusBadRequest, "invalid_request", "idempotencyKey")
	})
}

// taskLists is the real store, recording the page limits the API asks of
// TaskList.
type taskLists struct {
	store.Store
	mu     sync.Mutex
	limits []int
}

func (s *taskLists) TaskList(ctx context.Context, f store.TaskFilter, p store.Page) ([]*store.Task, string, error) {
	s.mu.Lock()
	s.limits = append(s.limits, p.Limit)
	s.mu.Unlock()
	return s.Store.TaskList(ctx, f, p)
}

func (s *taskLists) take() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.limits
	s.limits = nil
	return out
}

// With cause, the API asks the store for no more tasks than it still
// needs, so that the store's token is where the next page starts; and it
// stops after a bounded scan with a short (here empty) page and a token.
func TestCauseFilterPages(t *testing.T) {
	t.Parallel()
	lists := &taskLists{}
	e := setup(t, options{wrap: func(st store.Store) store.Store { lists.Store = st; return lists }})
	e.putPolicy(t, `{"policyId":"p"}`)
	mk := func(code int, msg string) string {
		id := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p"}`)["taskId"].(string)
		fail(t, e.st, id, store.Exhausted, code, msg)
		return id
	}
	old503 := mk(503, "HTTP 503")
	var timeouts []string
	for range 70 {
		timeouts = append(timeouts, mk(0, "i/o timeout"))
	}
	new503 := mk(503, "HTTP 503")
	lists.take()

	page := e.do(t, "GET", "/retry-tasks?cause=HTTP+503&limit=1", "").wantStatus(t, http.StatusOK)
	if got := ids(page); !reflect.DeepEqual(got, []string{new503}) {
		t.Fatalf("first page = %v, want the newest 503 alone", got)
	}
	if got := lists.take(); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("store pages asked = %v, want one of 1", got)
	}
	// The next page reads 64 store pages of 1 through the timeouts and
	// answers none, with a token to go on.
	page = e.do(t, "GET", "/retry-tasks?cause=HTTP+503&limit=1&pageToken="+url.QueryEscape(page["nextPageToken"].(string)), "").
		wantStatus(t, http.StatusOK)
	if items := page["items"].([]any); len(items) != 0 || page["nextPageToken"] == nil {
		t.Fatalf("second page = %v, want empty with a token (a bounded scan)", page)
	}
	if got := lists.take(); len(got) != 64 || slices.Max(got) != 1 {
		t.Errorf("store pages asked = %v, want 64 of 1", got)
	}
	page = e.do(t, "GET", "/retry-tasks?cause=HTTP+503&limit=1&pageToken="+url.QueryEscape(page["nextPageToken"].(string)), "").
		wantStatus(t, http.StatusOK)
	if got := ids(page); !reflect.DeepEqual(got, []string{old503}) {
		t.Errorf("third page = %v, want the oldest 503", got)
	}
	if got := listAll(t, e, "/retry-tasks?cause=timeout", 30); !slices.Equal(got, reverse(timeouts)) {
		t.Errorf("timeouts by 30 = %d tasks, want the 70", len(got))
	}
	for _, limit := range lists.take() {
		if limit > 30 {
			t.Errorf("a store page of %d asked for a list page of 30", limit)
		}
	}
}

func reverse(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func TestDeadLetterCauses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		e := setup(t, options{backend: backend})
		before := time.Now().UnixMilli()
		d := makeDeadSet(t, e)
		after := time.Now().UnixMilli()
		e.putPolicy(t, `{"policyId":"q"}`)
		other := e.createTask(t, `{"targetUrl":"http://h/","policyId":"q"}`)["taskId"].(string)
		fail(t, e.st, other, store.Failed, 0, "lookup nowhere.invalid: no such host")

		got := e.do(t, "GET", "/dead-letters/causes?policyId=p", "").wantStatus(t, http.StatusOK)
		if got["scanned"] != 10.0 || got["truncated"] != false {
			t.Errorf("scanned %v, truncated %v; want 10, false", got["scanned"], got["truncated"])
		}
		var causes []string
		for _, it := range got["items"].([]any) {
			g := it.(map[string]any)
			causes = append(causes, g["cause"].(string))
			first, last := int64(g["firstSeenAt"].(float64)), int64(g["lastSeenAt"].(float64))
			if first < before || last > after || first > last {
				t.Errorf("%v: seen %d to %d, want within %d to %d", g["cause"], first, last, before, after)
			}
		}
		if want := []string{"HTTP 503", "timeout", "connection refused"}; !slices.Equal(causes, want) {
			t.Fatalf("causes = %v, want %v (by count)", causes, want)
		}
		top := got["items"].([]any)[0].(map[string]any)
		if top["count"] != float64(len(d.http503)) || top["lastStatus"] != 503.0 || top["example"] != "HTTP 503 Service Unavailable" {
			t.Errorf("HTTP 503 group = %v", top)
		}
		refused := got["items"].([]any)[2].(map[string]any)
		if refused["count"] != 2.0 || refused["lastStatus"] != 0.0 || refused["example"] == "" {
			t.Errorf("connection refused group = %v", refused)
		}
		all := e.do(t, "GET", "/dead-letters/causes", "").wantStatus(t, http.StatusOK)
		if n := len(all["items"].([]any)); n != 4 || all["scanned"] != 11.0 {
			t.Errorf("all causes = %v, want 4 groups of 11 tasks (DNS too)", all)
		}
		e.do(t, "GET", "/dead-letters/causes?limit=5", "").wantError(t, http.StatusBadRequest, "invalid_request", "limit")
	})
}
