package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// clock is the fixed time of the notBefore tests: 0.4 ms into a
// millisecond, so that rounding shows.
var clockMs int64 = 1_750_000_000_000

func clock() time.Time { return time.UnixMilli(clockMs).Add(400 * time.Microsecond) }

// createBoth creates a task through POST /retry-tasks and through a batch
// of one, and returns both answers' tasks.
func (e *env) createBoth(t *testing.T, members string) [2]map[string]any {
	t.Helper()
	var out [2]map[string]any
	out[0] = e.createTask(t, `{"targetUrl":"http://h/single","policyId":"p",`+members+`}`)
	items := e.batchItems(t, `{"tasks":[{"targetUrl":"http://h/batch","policyId":"p",`+members+`}]}`)
	out[1] = wantItemTask(t, 0, items[0], http.StatusCreated)
	return out
}

func TestNotBeforeSetsTheFirstAttempt(t *testing.T) {
	t.Parallel()
	w := &wakes{}
	e := setup(t, options{now: clock, waker: w})
	e.putPolicy(t, `{"policyId":"p","totalBudgetMs":1000}`)
	tests := []struct {
		name, notBefore string
		due             int64 // the nextAttemptAt and budget start wanted
	}{
		{"a minute ahead", fmt.Sprint(clockMs + 60000), clockMs + 60000},
		// 0.6 ms ahead of the clock: cutting to the millisecond would
		// make it due 0.4 ms early.
		{"the next millisecond", fmt.Sprint(clockMs + 1), clockMs + 1},
		// 0.4 ms behind the clock: past, so due now.
		{"this millisecond", fmt.Sprint(clockMs), clockMs},
		{"an hour ago", fmt.Sprint(clockMs - 3600000), clockMs},
		{"ten days ago", fmt.Sprint(clockMs - 10*86400000), clockMs},
		{"exponent form", "1.750000000005e12", clockMs + 5},
		{"a whole number with a fraction part", fmt.Sprintf("%d.000", clockMs+7), clockMs + 7},
		{"null is absent", "null", clockMs},
		{"the furthest allowed", fmt.Sprint(clockMs + api.MaxNotBeforeOffset.Milliseconds()), clockMs + api.MaxNotBeforeOffset.Milliseconds()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, got := range e.createBoth(t, `"notBefore":`+tc.notBefore) {
				if got["nextAttemptAt"] != float64(tc.due) || got["createdAt"] != float64(clockMs) {
					t.Errorf("nextAttemptAt, createdAt = %v, %v; want %d, %d", got["nextAttemptAt"], got["createdAt"], tc.due, clockMs)
				}
				if _, ok := got["notBefore"]; ok {
					t.Errorf("the answer has a notBefore; nextAttemptAt shows it: %v", got)
				}
				st, err := e.store.TaskGet(context.Background(), api.DefaultTenant, got["taskId"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if !st.BudgetStart.Equal(time.UnixMilli(tc.due)) {
					t.Errorf("budget starts at %d, want %d (when the task may first run)", st.BudgetStart.UnixMilli(), tc.due)
				}
				w.mu.Lock()
				for _, d := range w.got {
					if d.ID == st.ID && !d.At.Equal(time.UnixMilli(tc.due)) {
						t.Errorf("woken at %d, want %d", d.At.UnixMilli(), tc.due)
					}
				}
				w.mu.Unlock()
			}
		})
	}
}

func TestNotBeforeInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, options{now: clock})
	e.putPolicy(t, `{"policyId":"p"}`)
	span := api.MaxNotBeforeOffset.Milliseconds()
	tests := []struct{ name, value, message string }{
		{"a string", fmt.Sprintf("%q", fmt.Sprint(clockMs)), "whole number"},
		{"a fraction", fmt.Sprintf("%d.5", clockMs), "whole number"},
		{"a tiny fraction", "1e-400", "whole number"},
		{"a boolean", "true", "whole number"},
		{"an object", `{"at":1}`, "whole number"},
		{"past ten years ahead", fmt.Sprint(clockMs + span + 1), "ahead"},
		{"huge", "1e300", "ahead"},
		{"past ten years behind", fmt.Sprint(clockMs - span - 1), "past"},
		{"seconds, not milliseconds", fmt.Sprint(clockMs / 1000), "seconds"},
		{"negative", "-1", "past"},
		{"hugely negative", "-1e300", "past"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			member := `"notBefore":` + tc.value
			single := e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"p",`+member+`}`).
				wantError(t, http.StatusBadRequest, "invalid_request", "notBefore")
			if !strings.Contains(single["message"].(string), tc.message) {
				t.Errorf("message %q does not say %q", single["message"], tc.message)
			}
			items := e.batchItems(t, `{"tasks":[{"targetUrl":"http://h/","policyId":"p",`+member+`}]}`)
			wantItemError(t, 0, items[0], http.StatusBadRequest, "invalid_request", "tasks[0].notBefore")
		})
	}
	t.Cleanup(func() {
		if n := taskCount(t, e.store); n != 0 {
			t.Errorf("%d tasks stored, want none", n)
		}
	})
}

// notBefore is part of the request an idempotency key stands for.
func TestNotBeforeIdempotency(t *testing.T) {
	t.Parallel()
	e := setup(t, options{now: clock})
	e.putPolicy(t, `{"policyId":"p"}`)
	at := clockMs + 60000
	task := func(key, notBefore string) string {
		if notBefore == "" {
			return fmt.Sprintf(`{"targetUrl":"http://h/","policyId":"p","idempotencyKey":%q}`, key)
		}
		return fmt.Sprintf(`{"targetUrl":"http://h/","policyId":"p","idempotencyKey":%q,"notBefore":%s}`, key, notBefore)
	}
	first := e.createTask(t, task("k", fmt.Sprint(at)))
	e.createTask(t, task("plain", ""))

	items := e.batchItems(t, `{"tasks":[`+strings.Join([]string{
		task("k", fmt.Sprint(at)),
		task("k", fmt.Sprintf("%d.0", at)), // the same number
		task("k", fmt.Sprint(at+1)),
		task("k", ""),
		task("plain", ""),
		task("plain", fmt.Sprint(clockMs-1000)), // past: due now all the same, but another request
	}, ",")+`]}`)
	for i, want := range []int{200, 200, 409, 409, 200, 409} {
		if items[i]["status"] != float64(want) {
			t.Errorf("item %d = %v, want status %d", i, items[i], want)
		}
	}
	if got := items[0]["task"].(map[string]any); got["taskId"] != first["taskId"] {
		t.Errorf("repeat = %v, want the first task %v", got, first)
	}
	e.do(t, "POST", "/retry-tasks", task("k", fmt.Sprint(at+1))).wantError(t, http.StatusConflict, "conflict", "idempotencyKey")
}

// A task stored before notBefore existed keeps its request hash: a repeat of
// it is still a repeat.
func TestNotBeforeKeepsOldHashes(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	e.putPolicy(t, `{"policyId":"p"}`)
	// The digest as POST /retry-tasks computed it before notBefore.
	b, _ := json.Marshal(struct {
		Method   string            `json:"m"`
		URL      string            `json:"u"`
		Headers  map[string]string `json:"h"`
		Body     []byte            `json:"b"`
		PolicyID string            `json:"p"`
	}{"POST", "http://h/old", map[string]string{"X-A": "1"}, []byte("hi"), "p"})
	sum := sha256.Sum256(b)
	old, _, err := e.store.TaskCreate(context.Background(), &store.Task{
		Tenant: api.DefaultTenant, IdempotencyKey: "old", RequestHash: hex.EncodeToString(sum[:]),
		TargetURL: "http://h/old", Method: "POST", Headers: map[string]string{"X-A": "1"}, Body: []byte("hi"), PolicyID: "p",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/old","policyId":"p","idempotencyKey":"old","headers":{"x-a":"1"},"body":"hi"}`).
		wantStatus(t, http.StatusOK)
	if got["taskId"] != old.ID {
		t.Errorf("repeat of a task stored before notBefore = %v, want task %s", got, old.ID)
	}
}

// The scheduler charges a task's time budget from its notBefore: a task
// scheduled for tomorrow with a minute's budget has that minute tomorrow.
func TestNotBeforeBudgetStartsThen(t *testing.T) {
	t.Parallel()
	e := setup(t, options{now: clock})
	spec := `{"maxAttempts":3,"totalBudgetMs":60000,"backoff":"FIXED","initialDelayMs":1000,"jitterType":"NONE"}`
	e.putPolicy(t, `{"policyId":"p",`+spec[1:])
	var p retry.Policy
	if err := json.Unmarshal([]byte(spec), &p); err != nil {
		t.Fatal(err)
	}
	tomorrow := clockMs + 86400000
	scheduled := e.createTask(t, fmt.Sprintf(`{"targetUrl":"http://h/","policyId":"p","notBefore":%d}`, tomorrow))
	plain := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p"}`)

	// The first attempt, made two seconds after notBefore, failed with a 503.
	now := time.UnixMilli(tomorrow + 2000)
	res := &dispatch.Result{Start: now.Add(-10 * time.Millisecond), Duration: 10 * time.Millisecond, Status: 503}
	decide := func(id string) store.Status {
		st, err := e.store.TaskGet(context.Background(), api.DefaultTenant, id)
		if err != nil {
			t.Fatal(err)
		}
		st.AttemptNumber = 1
		return scheduler.Decide(st, &p, res, now, rand.New(rand.NewPCG(1, 2))).Status
	}
	if got := decide(scheduled["taskId"].(string)); got != store.Pending {
		t.Errorf("the scheduled task after its first attempt is %s, want PENDING: its budget started at notBefore", got)
	}
	if got := decide(plain["taskId"].(string)); got != store.Exhausted {
		t.Errorf("a task created a day before its first attempt is %s, want EXHAUSTED (the budget is a minute)", got)
	}
}
