package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// TestDecideStepCases holds the rules: the decision step itself, fed each
// case's attempts one by one.
func TestDecideStepCases(t *testing.T) {
	t.Parallel()
	for _, c := range retrytest.StepCases() {
		t.Run(c.Name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now, prev := start, time.Duration(0)
			var delays []time.Duration
			var reason error
			for n := 1; ; n++ {
				res := c.Results[min(n, len(c.Results))-1]
				now = now.Add(res.Took)
				err := res.Err()
				if err == nil {
					break
				}
				v := c.Policy.Decide(&retry.Failure{Err: err, Attempt: n, PrevDelay: prev, Start: start, Now: now, Call: res.Took})
				if v.Stop != nil {
					reason = v.Stop
					break
				}
				delays, prev, now = append(delays, v.Delay), v.PrevDelay, now.Add(v.Delay)
			}
			if fmt.Sprint(delays) != fmt.Sprint(c.Delays) || reason != c.Reason {
				t.Errorf("delays %v, stop %v; want %v, %v", delays, reason, c.Delays, c.Reason)
			}
		})
	}
}

// TestDoFollowsStepCases runs each case through Do on a fake clock.
func TestDoFollowsStepCases(t *testing.T) {
	t.Parallel()
	for _, c := range retrytest.StepCases() {
		t.Run(c.Name, func(t *testing.T) {
			p, clock := setup(t, c.Policy)
			n := 0
			err := retry.Do(context.Background(), p, func(context.Context) error {
				res := c.Results[min(n, len(c.Results)-1)]
				n++
				clock.Advance(res.Took)
				return res.Err()
			})
			if fmt.Sprint(clock.Sleeps()) != fmt.Sprint(c.Delays) {
				t.Errorf("sleeps %v, want %v", clock.Sleeps(), c.Delays)
			}
			if c.Reason == nil && err != nil || c.Reason != nil && !errors.Is(err, c.Reason) {
				t.Errorf("Do = %v, want reason %v", err, c.Reason)
			}
			if want := len(c.Delays) + 1; n != want {
				t.Errorf("%d calls, want %d", n, want)
			}
		})
	}
}
