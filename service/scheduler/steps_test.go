package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// TestDecideFollowsStepCases runs the decision step's table through Decide
// as the scheduler runs a task: each attempt's answer as a dispatch.Result,
// the task's PrevDelay and attempt number carried over as the store keeps
// them, the clock moved by each call and on to each due time. A task must
// wait exactly what retry.Do sleeps and end for the same reason.
func TestDecideFollowsStepCases(t *testing.T) {
	t.Parallel()
	for _, c := range retrytest.StepCases() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			task := &store.Task{ID: "x", AttemptNumber: 1, BudgetStart: start}
			now := start
			var waits []time.Duration
			var f store.Finish
			for ; ; task.AttemptNumber++ {
				r := c.Results[min(task.AttemptNumber, len(c.Results))-1]
				res := &dispatch.Result{Start: now, Duration: r.Took, Status: r.Status,
					RetryAfter: r.RetryAfter, HasRetryAfter: r.RetryAfter > 0}
				now = now.Add(r.Took)
				f = scheduler.Decide(task, &c.Policy, res, now, nil)
				if f.Status != store.Pending {
					break
				}
				waits = append(waits, f.NextAttemptAt.Sub(now))
				now, task.PrevDelay = f.NextAttemptAt, f.PrevDelay
			}
			if fmt.Sprint(waits) != fmt.Sprint(c.Delays) {
				t.Errorf("waits %v, want %v", waits, c.Delays)
			}
			if want := len(c.Delays) + 1; task.AttemptNumber != want {
				t.Errorf("ended after attempt %d, want %d", task.AttemptNumber, want)
			}
			switch c.Reason {
			case nil:
				if f.Status != store.Succeeded {
					t.Errorf("task %s (%q), want SUCCEEDED", f.Status, f.LastError)
				}
			case retry.ErrNotRetryable:
				if f.Status != store.Failed {
					t.Errorf("task %s (%q), want FAILED", f.Status, f.LastError)
				}
			default:
				if f.Status != store.Exhausted || !strings.HasSuffix(f.LastError, "("+c.Reason.Error()+")") {
					t.Errorf("task %s (%q), want EXHAUSTED (%v)", f.Status, f.LastError, c.Reason)
				}
			}
		})
	}
}
