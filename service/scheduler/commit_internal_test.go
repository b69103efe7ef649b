package scheduler

import (
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// TestGroupClock pins when a group must be written for each kind of
// outcome in it.
func TestGroupClock(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	// A 5ms wait, a 50ms look-ahead, a last write of 1ms: the group ends
	// at t0+5ms, at t0+250µs when it must be quick, a retry due before
	// t0+56ms is due soon, and an outcome is written 501ms before its
	// lease ends (half the lease's margin is more than the look-ahead).
	normal := newGroupClock(t0, 5*ms, 50*ms, ms)
	// A look-ahead of 800ms: written 801ms before the lease's end.
	farAhead := newGroupClock(t0, 5*ms, 800*ms, ms)
	noWait := newGroupClock(t0, 0, 50*ms, ms)
	short := t0.Add(SoonCommitWait)

	succeeded := func(lease time.Time) finished {
		return finished{f: store.Finish{Status: store.Succeeded, Now: t0}, task: &store.Task{LeaseUntil: lease}}
	}
	retried := func(due time.Time) finished {
		return finished{f: store.Finish{Status: store.Pending, Now: t0, NextAttemptAt: due}, task: &store.Task{LeaseUntil: t0.Add(time.Hour)}}
	}
	tests := []struct {
		name string
		c    groupClock
		b    finished
		want time.Time
	}{
		{"a success waits the whole wait", normal, succeeded(t0.Add(time.Hour)), t0.Add(5 * ms)},
		{"a retry due later waits too", normal, retried(t0.Add(60 * ms)), t0.Add(5 * ms)},
		{"a retry due within the look-ahead after the wait is quick", normal, retried(t0.Add(30 * ms)), short},
		{"a retry due within the last write's time after that is quick", normal, retried(t0.Add(55*ms + 500*time.Microsecond)), short},
		{"a retry due at once is quick", normal, retried(time.Time{}), short},
		{"a lease ending soon brings the write forward", normal, succeeded(t0.Add(503 * ms)), t0.Add(2 * ms)},
		{"by as much as the look-ahead when it is longer", farAhead, succeeded(t0.Add(804 * ms)), t0.Add(3 * ms)},
		{"but never before SoonCommitWait", normal, succeeded(t0.Add(100 * ms)), short},
		{"a task without a lease is quick", normal, succeeded(time.Time{}), short},
		{"no wait", noWait, succeeded(t0.Add(time.Hour)), t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.c.by(tt.b); !got.Equal(tt.want) {
				t.Fatalf("by = t0%+v, want t0%+v", got.Sub(t0), tt.want.Sub(t0))
			}
		})
	}
}
