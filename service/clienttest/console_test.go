package clienttest_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/client"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// setupStore is setup, also returning the store under the API, through
// which tests make dead letters as the scheduler would.
func setupStore(t *testing.T) (*client.Client, store.Store) {
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
	return client.New(srv.URL, token, client.WithHTTPClient(srv.Client())), st
}

// kill makes the task a dead letter: one attempt, ending it with code (0
// for no response) and msg.
func kill(t *testing.T, st store.Store, id string, code int, msg string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	ts, err := st.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: []string{id}})
	if err != nil || len(ts) != 1 {
		t.Fatalf("TaskClaim = %v, %v", ts, err)
	}
	errs, err := st.TaskFinish(ctx, []store.Finish{{TaskID: id, Version: ts[0].Version, Status: store.Exhausted,
		Attempt:   store.Attempt{AttemptNumber: 1, StartedAt: now, ResponseStatus: code, ErrorMessage: msg},
		LastError: msg, LastStatus: code, Now: now}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish = %v, %v", errs, err)
	}
}

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	c, _ := setupStore(t)
	ctx := context.Background()
	task, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "http://h/"})
	if err != nil || task.PolicyID != client.BuiltinPolicyID {
		t.Fatalf("CreateTask without a policy = %+v, %v; want policy default", task, err)
	}
	p, err := c.GetPolicy(ctx, client.BuiltinPolicyID)
	want := retry.Policy{Backoff: backoff.Policy{Kind: backoff.Exponential, Base: time.Second, Multiplier: 2, Max: 5 * time.Minute},
		MaxAttempts: 10, Budget: 24 * time.Hour}
	if err != nil || !p.Builtin || p.Settings.Attempts() != want.MaxAttempts || p.Settings.Budget != want.Budget ||
		p.Settings.Backoff.Base != want.Backoff.Base || p.Settings.Backoff.Max != want.Backoff.Max {
		t.Errorf("GetPolicy(default) = %+v, %v; want the built-in", p, err)
	}
	// Builtin is reported, never sent: registering the policy read back
	// gives the tenant a default of its own.
	p.Settings.MaxAttempts = 3
	own, created, err := c.PutPolicy(ctx, *p)
	if err != nil || !created || own.Builtin || own.Settings.MaxAttempts != 3 {
		t.Errorf("PutPolicy of a changed built-in = %+v, %v, %v; want the tenant's own, created", own, created, err)
	}
	page, err := c.ListPolicies(ctx, client.ListOptions{})
	if err != nil || len(page.Items) != 1 || page.Items[0].Builtin || page.Items[0].Settings.MaxAttempts != 3 {
		t.Errorf("ListPolicies = %+v, %v; want the tenant's own default alone", page, err)
	}
}

func TestBulkAndCauses(t *testing.T) {
	t.Parallel()
	c, st := setupStore(t)
	ctx := context.Background()
	var dead503, deadTimeout []string
	for i := range 7 {
		host := "a.example"
		if i%2 == 1 {
			host = "b.example"
		}
		task, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "http://" + host + "/", IdempotencyKey: "k" + string(rune('0'+i))})
		if err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			kill(t, st, task.TaskID, 503, "HTTP 503 Service Unavailable")
			dead503 = append(dead503, task.TaskID)
		} else {
			kill(t, st, task.TaskID, 0, "context deadline exceeded")
			deadTimeout = append(deadTimeout, task.TaskID)
		}
	}

	causes, err := c.DeadLetterCauses(ctx, "")
	if err != nil || causes.Scanned != 7 || causes.Truncated || len(causes.Items) != 2 {
		t.Fatalf("DeadLetterCauses = %+v, %v", causes, err)
	}
	if g := causes.Items[0]; g.Cause != "HTTP 503" || g.Count != 5 || g.LastStatus != 503 || g.Example == "" ||
		g.FirstSeenAt == 0 || g.LastSeenAt < g.FirstSeenAt {
		t.Errorf("first group = %+v", g)
	}
	if g := causes.Items[1]; g.Cause != "timeout" || g.Count != 2 || g.LastStatus != 0 {
		t.Errorf("second group = %+v", g)
	}
	if none, err := c.DeadLetterCauses(ctx, "other"); err != nil || len(none.Items) != 0 || none.Items == nil {
		t.Errorf("DeadLetterCauses(other) = %+v, %v; want no groups", none, err)
	}

	page, err := c.ListTasks(ctx, client.TaskQuery{Cause: "timeout", TargetHost: "b.example"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TaskID != deadTimeout[0] || page.Items[0].Cause != "timeout" {
		t.Errorf("ListTasks(timeout, b.example) = %+v, %v", page, err)
	}
	page, err = c.ListTasks(ctx, client.TaskQuery{IdempotencyKey: "k0"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TaskID != dead503[0] {
		t.Errorf("ListTasks(key k0) = %+v, %v", page, err)
	}

	// One call at a time, then RedriveAll for the rest.
	f := client.BulkFilter{Cause: "HTTP 503", Limit: 2}
	if r, err := c.RedriveTasks(ctx, f); err != nil || r != (client.BulkResult{Count: 2, More: true}) {
		t.Errorf("RedriveTasks = %+v, %v; want 2, more", r, err)
	}
	var seen []int
	n, err := c.RedriveAll(ctx, f, func(done int) { seen = append(seen, done) })
	if err != nil || n != 3 || !slices.Equal(seen, []int{2, 3}) {
		t.Errorf("RedriveAll = %d, %v (progress %v); want 3 in calls of 2 and 1", n, err, seen)
	}
	for _, id := range dead503 {
		if task, err := c.GetTask(ctx, id); err != nil || task.Status != client.Pending {
			t.Errorf("503 task %s = %+v, %v; want PENDING", id, task, err)
		}
	}

	// Cancel what is pending on a.example, then all the rest.
	if r, err := c.CancelTasks(ctx, client.BulkFilter{TargetHost: "a.example"}); err != nil || r != (client.BulkResult{Count: 3}) {
		t.Errorf("CancelTasks(a.example) = %+v, %v; want 3, no more", r, err)
	}
	if n, err := c.CancelAll(ctx, client.BulkFilter{Limit: 1}, nil); err != nil || n != 2 {
		t.Errorf("CancelAll = %d, %v; want the 2 left", n, err)
	}

	_, err = c.RedriveTasks(ctx, client.BulkFilter{Statuses: []client.Status{client.Pending}})
	var ae *client.Error
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &ae) || ae.Field != "status" {
		t.Errorf("RedriveTasks of PENDING tasks = %v, want a 400 naming status", err)
	}
	if _, err := c.CancelAll(ctx, client.BulkFilter{Limit: 5000}, nil); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("CancelAll with a limit of 5000 = %v, want ErrInvalid", err)
	}
}

func TestPreviewPolicy(t *testing.T) {
	t.Parallel()
	c, _ := setupStore(t)
	ctx := context.Background()
	pol := retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 250 * time.Millisecond, Jitter: backoff.NoJitter}, MaxAttempts: 3}
	pv, err := c.PreviewPolicy(ctx, client.PreviewRequest{Policy: &pol, Samples: 10})
	if err != nil || pv.MaxAttempts != 3 || pv.Samples != 10 || len(pv.Attempts) != 3 {
		t.Fatalf("PreviewPolicy = %+v, %v", pv, err)
	}
	if a := pv.Attempts[2]; a.Attempt != 3 || a.DelayMs != (client.Percentiles{P5: 250, P50: 250, P95: 250}) ||
		a.CumulativeMs.P50 != 500 || a.Reached != 1 {
		t.Errorf("attempt 3 = %+v", a)
	}
	pv, err = c.PreviewPolicy(ctx, client.PreviewRequest{PolicyID: client.BuiltinPolicyID})
	if err != nil || pv.MaxAttempts != 10 || pv.BudgetMs != 86400000 || pv.Samples != 2000 {
		t.Errorf("PreviewPolicy(default) = %+v, %v", pv, err)
	}
	if _, err := c.PreviewPolicy(ctx, client.PreviewRequest{PolicyID: "missing"}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("PreviewPolicy of a missing policy = %v, want ErrInvalid", err)
	}
	for _, r := range []client.PreviewRequest{{}, {PolicyID: "x", Policy: &pol}} {
		if _, err := c.PreviewPolicy(ctx, r); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("PreviewPolicy(%+v) = %v, want ErrInvalid before any request", r, err)
		}
	}
}
