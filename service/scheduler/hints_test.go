package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// A task's retry is on time whatever stale news of it reaches the
// scheduler after its first attempt, in whatever order: the API's hint of
// its creation, a lease watch's of its first lease (a minute later than the
// retry), a note from an older retryd without a version. The resync is an
// hour away, so nothing else could rescue a task the heap lost or put off.
func TestStaleHintsInEveryOrderLeaveTheRetryOnTime(t *testing.T) {
	t.Parallel()
	stale := func(task *store.Task) []store.Due {
		return []store.Due{
			{ID: task.ID, At: task.CreatedAt, Version: 1},
			{ID: task.ID, At: task.CreatedAt.Add(time.Minute), Version: 2},
			{ID: task.ID, At: task.CreatedAt},
		}
	}
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			t.Parallel()
			st := openStore(t, "")
			tg := newTarget(t, 503, 200)
			p := fast(3)
			p.Backoff = backoffFixed(time.Second)
			putPolicy(t, st, "second", p)
			s, _ := start(t, st, options{cfg: schedulerConfig(time.Hour)})

			task := addTask(t, st, tg.URL, "second")
			s.Wake(task.Due())
			waitFor(t, st, task.ID, func(got *store.Task) bool { return got.AttemptNumber == 1 && got.Status == store.Pending })
			hints := stale(task)
			for _, i := range order {
				s.Wake(hints[i])
			}
			done := waitFor(t, st, task.ID, terminal)
			if done.Status != store.Succeeded || done.AttemptNumber != 2 {
				t.Fatalf("task %s after %d attempts, want SUCCEEDED after 2", done.Status, done.AttemptNumber)
			}
			checkNotEarly(t, attempts(t, st, task.ID), time.Second)
		})
	}
}

// checkNotEarly fails t if an attempt of log started before the previous
// one ended plus delay (to the millisecond the store keeps).
func checkNotEarly(t *testing.T, log []*store.Attempt, delay time.Duration) {
	t.Helper()
	for i := 1; i < len(log); i++ {
		prev := log[i-1]
		earliest := prev.StartedAt.Add(prev.Duration).Add(delay).Truncate(time.Millisecond)
		if log[i].StartedAt.Before(earliest.Add(-time.Millisecond)) {
			t.Errorf("attempt %d started at %v, before %v: %v after the previous one ended", log[i].AttemptNumber,
				log[i].StartedAt, earliest, log[i].StartedAt.Sub(prev.StartedAt.Add(prev.Duration)))
		}
	}
}
