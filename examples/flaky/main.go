// Command flaky retries an operation that fails twice before it succeeds,
// and prints each attempt and the delay chosen before the next one.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	policy := retry.Policy{
		Name:        "fetch-greeting",
		MaxAttempts: 5,
		Budget:      5 * time.Second,
		Backoff: backoff.Policy{
			Kind:   backoff.Exponential,
			Base:   100 * time.Millisecond,
			Max:    2 * time.Second,
			Jitter: backoff.FullJitter,
		},
		Logger: logger,
		Observer: retry.OnRetry(func(_ context.Context, a retry.Event) {
			fmt.Printf("attempt %d/%d failed (%v); next in %v\n", a.Attempt, a.MaxAttempts, a.Err, a.Delay.Round(time.Millisecond))
		}),
	}

	calls := 0
	greeting, err := retry.DoValue(context.Background(), policy, func(ctx context.Context) (string, error) {
		calls++
		if calls <= 2 {
			return "", errors.New("service unavailable")
		}
		return "hello after " + fmt.Sprint(calls) + " attempts", nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "failed:", err)
		os.Exit(1)
	}
	fmt.Println(greeting)
}
