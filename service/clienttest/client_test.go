package clienttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/client"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/store/sqlite"
)

const token = "client-test-token-0123456789"

// setup serves the real API over a real SQLite file and returns a Client of it.
func setup(t *testing.T) (*client.Client, string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := api.NewTokens(map[string]string{token: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return client.New(srv.URL, token, client.WithHTTPClient(srv.Client())), srv.URL
}

func TestPolicyRoundTrip(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	want := client.Policy{ID: "linear", Settings: retry.Policy{
		Backoff:     backoff.Policy{Kind: backoff.Linear, Base: 250 * time.Millisecond, Increment: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.EqualJitter},
		MaxAttempts: 4, Budget: time.Minute, RetryableStatusCodes: []int{429, 503},
	}}
	got, created, err := c.PutPolicy(ctx, want)
	if err != nil || !created {
		t.Fatalf("PutPolicy = %v, %v; want created", created, err)
	}
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(got)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("stored policy = %s\nwant %s", gotJSON, wantJSON)
	}
	if _, created, err := c.PutPolicy(ctx, want); err != nil || created {
		t.Errorf("repeat PutPolicy = %v, %v; want not created", created, err)
	}
	other := want
	other.Settings.MaxAttempts = 9
	_, _, err = c.PutPolicy(ctx, other)
	var ae *client.Error
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ae) || ae.Field != "policyId" || ae.StatusCode != 409 {
		t.Errorf("conflicting PutPolicy error = %#v, want a 409 naming policyId", err)
	}
	fetched, err := c.GetPolicy(ctx, "linear")
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := json.Marshal(fetched); string(f) != string(wantJSON) {
		t.Errorf("GetPolicy = %s, want %s", f, wantJSON)
	}
	page, err := c.ListPolicies(ctx, client.ListOptions{})
	// The built-in "default" is listed before it, by ID.
	if err != nil || len(page.Items) != 2 || !page.Items[0].Builtin || page.Items[1].ID != "linear" || page.Items[1].Builtin || page.NextPageToken != "" {
		t.Errorf("ListPolicies = %+v, %v", page, err)
	}
}

func TestTaskLifecycle(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	if _, _, err := c.PutPolicy(ctx, client.Policy{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	req := client.TaskRequest{TargetURL: "http://h/x", PolicyID: "p", Headers: map[string]string{"x-a": "1"}, BodyBase64: []byte{0, 1, 2}, IdempotencyKey: "k"}
	task, created, err := c.CreateTask(ctx, req)
	if err != nil || !created {
		t.Fatalf("CreateTask = %v, %v", created, err)
	}
	if task.Status != client.Pending || task.Method != "POST" || task.Headers["X-A"] != "1" ||
		!reflect.DeepEqual(task.BodyBase64, []byte{0, 1, 2}) || task.IdempotencyKey != "k" || task.CreatedAt.Time().IsZero() {
		t.Errorf("created task = %+v", task)
	}
	again, created, err := c.CreateTask(ctx, req)
	if err != nil || created || again.TaskID != task.TaskID {
		t.Errorf("repeat CreateTask = %+v, %v, %v; want the same task, not created", again, created, err)
	}
	req.TargetURL = "http://h/y"
	if _, _, err := c.CreateTask(ctx, req); !errors.Is(err, client.ErrConflict) {
		t.Errorf("CreateTask with a reused key = %v, want ErrConflict", err)
	}

	got, err := c.GetTask(ctx, task.TaskID)
	if err != nil || !reflect.DeepEqual(got, task) {
		t.Errorf("GetTask = %+v, %v; want %+v", got, err, task)
	}
	page, err := c.ListTasks(ctx, client.TaskQuery{Statuses: []client.Status{client.Pending}, PolicyID: "p"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TaskID != task.TaskID {
		t.Errorf("ListTasks = %+v, %v", page, err)
	}
	attempts, err := c.ListAttempts(ctx, task.TaskID, client.ListOptions{Limit: 5})
	if err != nil || len(attempts.Items) != 0 {
		t.Errorf("ListAttempts = %+v, %v; want none", attempts, err)
	}
	if _, err := c.RedriveTask(ctx, task.TaskID); !errors.Is(err, client.ErrConflict) {
		t.Errorf("RedriveTask of a PENDING task = %v, want ErrConflict", err)
	}
	cancelled, err := c.CancelTask(ctx, task.TaskID)
	if err != nil || cancelled.Status != client.Cancelled || cancelled.FinishedAt == 0 || cancelled.NextAttemptAt != 0 {
		t.Errorf("CancelTask = %+v, %v", cancelled, err)
	}
	dead, err := c.ListDeadLetters(ctx, "", client.ListOptions{})
	if err != nil || len(dead.Items) != 0 {
		t.Errorf("ListDeadLetters = %+v, %v; want none", dead, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	c, url := setup(t)
	ctx := context.Background()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	t.Cleanup(plain.Close)

	tests := []struct {
		name       string
		call       func() error
		sentinel   error
		status     int
		code       string
		field      string
		wantAPIErr bool
	}{
		{"not found", func() error { _, err := c.GetTask(ctx, "00000000-0000-4000-8000-000000000000"); return err },
			client.ErrNotFound, 404, "not_found", "", true},
		{"invalid field", func() error {
			_, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "ftp://x/", PolicyID: "p"})
			return err
		}, client.ErrInvalid, 400, "invalid_request", "targetUrl", true},
		{"unknown policy", func() error {
			_, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "http://x/", PolicyID: "p"})
			return err
		}, client.ErrInvalid, 400, "unknown_policy", "policyId", true},
		{"bad token", func() error {
			_, err := client.New(url, "wrong-token-0123456789").ListPolicies(ctx, client.ListOptions{})
			return err
		}, client.ErrUnauthorized, 401, "unauthorized", "", true},
		{"not the API", func() error {
			_, err := client.New(plain.URL, "").ListPolicies(ctx, client.ListOptions{})
			return err
		}, nil, 502, "", "", true},
		{"bad base URL", func() error {
			_, err := client.New("127.0.0.1:8080", "").ListPolicies(ctx, client.ListOptions{})
			return err
		}, nil, 0, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call()
			if err == nil {
				t.Fatal("no error")
			}
			var ae *client.Error
			if got := errors.As(err, &ae); got != tc.wantAPIErr {
				t.Fatalf("errors.As(%v, *Error) = %v, want %v", err, got, tc.wantAPIErr)
			}
			if !tc.wantAPIErr {
				return
			}
			if ae.StatusCode != tc.status || ae.Code != tc.code || ae.Field != tc.field || ae.Message == "" {
				t.Errorf("error = %+v, want status %d code %q field %q", ae, tc.status, tc.code, tc.field)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.sentinel)
			}
		})
	}
}

func TestCreateTasks(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	if _, _, err := c.PutPolicy(ctx, client.Policy{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	earlier, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "http://h/earlier", PolicyID: "p", IdempotencyKey: "earlier"})
	if err != nil {
		t.Fatal(err)
	}
	later := client.MillisOf(time.Now().Add(time.Hour))
	res, err := c.CreateTasks(ctx, []client.TaskRequest{
		{TargetURL: "http://h/0", PolicyID: "p", Body: "zero", NotBefore: later},
		{TargetURL: "http://h/earlier", PolicyID: "p", IdempotencyKey: "earlier"},
		{TargetURL: "http://h/other", PolicyID: "p", IdempotencyKey: "earlier"},
		{TargetURL: "ftp://h/", PolicyID: "p"},
		{TargetURL: "http://h/4", PolicyID: "nope"},
	})
	if err != nil || len(res) != 5 {
		t.Fatalf("CreateTasks = %v, %v; want 5 results", res, err)
	}
	if r := res[0]; !r.Created() || r.Err() != nil || r.Task.Body != "zero" || r.Task.NextAttemptAt != later || r.Task.Status != client.Pending {
		t.Errorf("result 0 = %+v (task %+v), want created, due at %d", r, r.Task, later)
	}
	if r := res[1]; r.Created() || r.Err() != nil || r.Status != 200 || !reflect.DeepEqual(r.Task, earlier) {
		t.Errorf("result 1 = %+v, want the earlier task %+v", r, earlier)
	}
	for _, want := range []struct {
		i        int
		sentinel error
		status   int
		code     string
		field    string
	}{
		{2, client.ErrConflict, 409, "conflict", "tasks[2].idempotencyKey"},
		{3, client.ErrInvalid, 400, "invalid_request", "tasks[3].targetUrl"},
		{4, client.ErrInvalid, 400, "unknown_policy", "tasks[4].policyId"},
	} {
		i := want.i
		r := res[i]
		var ae *client.Error
		if r.Created() || r.Task != nil || !errors.Is(r.Err(), want.sentinel) || !errors.As(r.Err(), &ae) ||
			ae.StatusCode != want.status || ae.Code != want.code || ae.Field != want.field || ae.Message == "" {
			t.Errorf("result %d = %+v (error %v), want %d %s naming %s", i, r, r.Err(), want.status, want.code, want.field)
		}
	}
	got, err := c.GetTask(ctx, res[0].Task.TaskID)
	if err != nil || !reflect.DeepEqual(got, res[0].Task) {
		t.Errorf("GetTask = %+v, %v; want %+v", got, err, res[0].Task)
	}

	// Errors of the whole request.
	for _, n := range []int{0, client.MaxBatch + 1} {
		rs := make([]client.TaskRequest, n)
		for i := range rs {
			rs[i] = client.TaskRequest{TargetURL: "http://h/", PolicyID: "p"}
		}
		_, err := c.CreateTasks(ctx, rs)
		var ae *client.Error
		if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &ae) || ae.Field != "tasks" {
			t.Errorf("CreateTasks of %d tasks = %v, want a 400 naming tasks", n, err)
		}
	}
	page, err := c.ListTasks(ctx, client.TaskQuery{})
	if err != nil || len(page.Items) != 2 {
		t.Errorf("tasks stored = %+v, %v; want the earlier one and one created", page, err)
	}
}

// NotBefore holds the first attempt; the same key with another NotBefore
// is another request.
func TestCreateTaskNotBefore(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	if _, _, err := c.PutPolicy(ctx, client.Policy{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	at := client.MillisOf(time.Now().Add(24 * time.Hour))
	req := client.TaskRequest{TargetURL: "http://h/", PolicyID: "p", IdempotencyKey: "k", NotBefore: at}
	task, created, err := c.CreateTask(ctx, req)
	if err != nil || !created || task.NextAttemptAt != at {
		t.Fatalf("CreateTask = %+v, %v, %v; want created, due at %d", task, created, err, at)
	}
	if _, created, err := c.CreateTask(ctx, req); err != nil || created {
		t.Errorf("repeat = %v, %v; want a repeat", created, err)
	}
	req.NotBefore++
	if _, _, err := c.CreateTask(ctx, req); !errors.Is(err, client.ErrConflict) {
		t.Errorf("the same key with another NotBefore = %v, want ErrConflict", err)
	}
	req.NotBefore = client.MillisOf(time.Now().AddDate(20, 0, 0))
	req.IdempotencyKey = ""
	var ae *client.Error
	if _, _, err := c.CreateTask(ctx, req); !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Field != "notBefore" {
		t.Errorf("NotBefore in 20 years = %v, want a 400 naming notBefore", err)
	}
}

func TestMillisOf(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_750_000_000_000)
	for _, tc := range []struct {
		t    time.Time
		want client.Millis
	}{
		{time.Time{}, 0},
		{base, 1_750_000_000_000},
		{base.Add(time.Nanosecond), 1_750_000_000_001}, // never early
		{base.Add(999 * time.Microsecond), 1_750_000_000_001},
		{base.Add(-time.Nanosecond), 1_750_000_000_000},
	} {
		if got := client.MillisOf(tc.t); got != tc.want {
			t.Errorf("MillisOf(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
	if got := client.MillisOf(base).Time(); !got.Equal(base) {
		t.Errorf("MillisOf(t).Time() = %v, want %v", got, base)
	}
}
