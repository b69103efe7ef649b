package scheduler

import (
	"sync"
	"time"
)

// aheadWindow is how long a slow claim keeps the look-ahead long.
const aheadWindow = 5 * time.Second

// lookahead decides how long before its due time a task is claimed: twice
// the slowest claim of the last five to ten seconds, kept within [min, max].
// A durable claim then completes before the task is due even when the
// store's commits slow down (a checkpoint, a busy disk), and the attempt
// starts on time. Safe for concurrent use.
type lookahead struct {
	min, max time.Duration

	mu          sync.Mutex
	cur, prev   time.Duration // slowest claim of this window and the last
	windowStart time.Time
}

// observe records how long a claim took.
func (l *lookahead) observe(now time.Time, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(now)
	l.cur = max(l.cur, took)
}

// get returns the current look-ahead.
func (l *lookahead) get(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(now)
	return min(max(2*max(l.cur, l.prev), l.min), l.max)
}

func (l *lookahead) roll(now time.Time) {
	switch since := now.Sub(l.windowStart); {
	case since >= 2*aheadWindow:
		l.cur, l.prev, l.windowStart = 0, 0, now
	case since >= aheadWindow:
		l.prev, l.cur, l.windowStart = l.cur, 0, now
	}
}
