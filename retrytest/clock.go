// Package retrytest helps test code that retries: a fake clock whose sleeps
// cost no time, so budgets and delays can be asserted exactly.
package retrytest

import (
	"context"
	"sync"
	"time"

	"github.com/retrykit/retry"
)

// Clock is a fake retry.Clock. Sleep returns at once (or with the context's
// error if it is already done) after moving the fake time forward by the
// delay, and records it. Advance moves time by hand, to stand for the
// duration of a call. A Clock is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

// NewClock returns a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep records d and moves the fake time forward by it, unless ctx is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

// Advance moves the fake time forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleeps returns the delays slept so far, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

var _ retry.Clock = (*Clock)(nil)
