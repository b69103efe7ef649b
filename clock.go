package retry

import (
	"context"
	"time"
)

// Clock is the time source of an execution. Tests inject a fake one (package
// retrytest has one) so that sleeps cost nothing and budgets are exact.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, whichever is first, and returns
	// ctx's error in the second case. It must leave no timer or goroutine
	// behind when it returns.
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the wall clock. It is a zero-size type, so using it costs no
// allocation.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

var _ Clock = realClock{}
