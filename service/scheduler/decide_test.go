package scheduler_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	exp := retry.Policy{MaxAttempts: 4, Backoff: backoff.Policy{Kind: backoff.Exponential, Base: time.Second, Max: time.Minute, Jitter: backoff.NoJitter}}
	budget := exp
	budget.Budget = 10 * time.Second
	task := func(attempt int) *store.Task {
		return &store.Task{ID: "x", Version: 7, AttemptNumber: attempt, BudgetStart: t0, PrevDelay: 2 * time.Second}
	}
	answer := func(status int) *dispatch.Result {
		return &dispatch.Result{Start: t0, Duration: 100 * time.Millisecond, Status: status}
	}
	tests := []struct {
		name     string
		task     *store.Task
		policy   retry.Policy
		res      *dispatch.Result
		now      time.Time
		want     store.Status
		wantNext time.Time
		wantPrev time.Duration
		wantErr  string
	}{
		{"2xx succeeds", task(1), exp, answer(201), t0, store.Succeeded, time.Time{}, 2 * time.Second, ""},
		{"404 fails", task(1), exp, answer(404), t0, store.Failed, time.Time{}, 2 * time.Second, "HTTP 404 Not Found"},
		{"503 retries after the first delay", task(1), exp, answer(503), t0, store.Pending, t0.Add(time.Second), time.Second, "HTTP 503 Service Unavailable"},
		{"third retry doubles twice", task(3), exp, answer(503), t0, store.Pending, t0.Add(4 * time.Second), 4 * time.Second, "HTTP 503 Service Unavailable"},
		{"last attempt exhausts", task(4), exp, answer(503), t0, store.Exhausted, time.Time{}, 2 * time.Second, "HTTP 503 Service Unavailable (attempts exhausted)"},
		{"network error retries", task(1), exp, &dispatch.Result{Start: t0, Err: errors.New("connection reset")}, t0, store.Pending, t0.Add(time.Second), time.Second, "connection reset"},
		{"refused target fails", task(1), exp, &dispatch.Result{Start: t0, Err: dispatch.ErrTargetRefused}, t0, store.Failed, time.Time{}, 2 * time.Second, "target address refused"},
		{"retry-after lengthens the delay", task(1), exp, &dispatch.Result{Start: t0, Status: 429, RetryAfter: 30 * time.Second, HasRetryAfter: true}, t0,
			store.Pending, t0.Add(30 * time.Second), time.Second, "HTTP 429 Too Many Requests"},
		{"retry-after is a floor beyond max, capped without a budget", task(1), exp, &dispatch.Result{Start: t0, Status: 429, RetryAfter: time.Hour, HasRetryAfter: true}, t0,
			store.Pending, t0.Add(retry.DefaultMaxRetryAfter), time.Second, "HTTP 429 Too Many Requests"},
		{"a 4xx fails even with attempts left", task(1), budget, answer(400), t0.Add(time.Second), store.Failed, time.Time{}, 2 * time.Second, "HTTP 400 Bad Request"},
		{"shorter retry-after ignored", task(2), exp, &dispatch.Result{Start: t0, Status: 429, RetryAfter: time.Millisecond, HasRetryAfter: true}, t0,
			store.Pending, t0.Add(2 * time.Second), 2 * time.Second, "HTTP 429 Too Many Requests"},
		// 7s spent + 2s delay + 0.1s call fits in 10s; 8s spent does not.
		{"within budget", task(2), budget, answer(503), t0.Add(7 * time.Second), store.Pending, t0.Add(9 * time.Second), 2 * time.Second, "HTTP 503 Service Unavailable"},
		{"budget exhausted", task(2), budget, answer(503), t0.Add(8 * time.Second), store.Exhausted, time.Time{}, 2 * time.Second, "HTTP 503 Service Unavailable (time budget exhausted)"},
		{"retry-after past the budget", task(1), budget, &dispatch.Result{Start: t0, Status: 503, RetryAfter: 20 * time.Second, HasRetryAfter: true}, t0,
			store.Exhausted, time.Time{}, time.Second, "HTTP 503 Service Unavailable (time budget exhausted)"},
		// Retrykit-Retry: never ends the task whatever the status and the
		// policy, but a success stays one.
		{"never ends a retryable status", task(1), exp, &dispatch.Result{Start: t0, Status: 503, NoRetry: true}, t0,
			store.Failed, time.Time{}, 2 * time.Second, "HTTP 503 Service Unavailable (the target asked for no more retries: Retrykit-Retry: never)"},
		{"never over a retry-after", task(1), exp, &dispatch.Result{Start: t0, Status: 429, RetryAfter: time.Second, HasRetryAfter: true, NoRetry: true}, t0,
			store.Failed, time.Time{}, 2 * time.Second, "HTTP 429 Too Many Requests (the target asked for no more retries: Retrykit-Retry: never)"},
		{"never is FAILED, not EXHAUSTED, on the last attempt", task(4), exp, &dispatch.Result{Start: t0, Status: 503, NoRetry: true}, t0,
			store.Failed, time.Time{}, 2 * time.Second, "HTTP 503 Service Unavailable (the target asked for no more retries: Retrykit-Retry: never)"},
		{"never on a 4xx says so", task(1), exp, &dispatch.Result{Start: t0, Status: 404, NoRetry: true}, t0,
			store.Failed, time.Time{}, 2 * time.Second, "HTTP 404 Not Found (the target asked for no more retries: Retrykit-Retry: never)"},
		{"never on a 2xx is a success", task(1), exp, &dispatch.Result{Start: t0, Status: 200, NoRetry: true}, t0,
			store.Succeeded, time.Time{}, 2 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scheduler.Decide(tt.task, &tt.policy, tt.res, tt.now, nil)
			if got.Status != tt.want || !got.NextAttemptAt.Equal(tt.wantNext) || got.PrevDelay != tt.wantPrev || got.LastError != tt.wantErr {
				t.Fatalf("Decide = %s next %v prev %v err %q; want %s next %v prev %v err %q",
					got.Status, got.NextAttemptAt, got.PrevDelay, got.LastError, tt.want, tt.wantNext, tt.wantPrev, tt.wantErr)
			}
			if got.TaskID != "x" || got.Version != 7 || got.Attempt.AttemptNumber != tt.task.AttemptNumber || got.LastStatus != tt.res.Status {
				t.Fatalf("Decide = %+v: task, version, attempt or status not carried over", got)
			}
		})
	}
}

// Decorrelated jitter continues from the stored previous delay, so a
// restart between attempts does not restart the sequence.
func TestDecideContinuesDecorrelatedJitter(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 10, Backoff: backoff.Policy{Kind: backoff.Exponential, Base: 10 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.DecorrelatedJitter}}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seq := backoff.NewSequence(p.Backoff, rand.NewPCG(1, 2))
	src := rand.NewPCG(1, 2)
	task := &store.Task{ID: "x", AttemptNumber: 1}
	for n := 1; n <= 6; n++ {
		task.AttemptNumber = n
		f := scheduler.Decide(task, &p, &dispatch.Result{Start: t0, Status: 503}, t0, src)
		if want := seq.Next(); f.PrevDelay != want {
			t.Fatalf("retry %d: delay %v, want %v (the library's own sequence)", n, f.PrevDelay, want)
		}
		task.PrevDelay = f.PrevDelay // what the store keeps across restarts
	}
}
