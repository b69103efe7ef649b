package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

func TestInvalidPolicyIsAnErrorBeforeAnyCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy retry.Policy
		fields string
	}{
		{"negative attempts", retry.Policy{MaxAttempts: -1}, "[maxAttempts]"},
		{"min above max", retry.Policy{Backoff: backoff.Policy{Min: 5 * time.Second, Max: time.Second}}, "[minDelayMs]"},
		{"negative timeouts", retry.Policy{AttemptTimeout: -1, MaxRetryAfter: -1}, "[attemptTimeoutMs maxRetryAfterMs]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retry.Do(context.Background(), tt.policy, func(context.Context) error { calls++; return nil })
			var names []string
			for _, fe := range backoff.FieldErrors(err) {
				names = append(names, fe.Field)
			}
			if calls != 0 || fmt.Sprint(names) != tt.fields {
				t.Errorf("Do = %v after %d calls; want fields %s and no call", err, calls, tt.fields)
			}
		})
	}
}

func TestEndedContextMakesNoCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("shutting down")
	cancel(cause)
	calls := 0
	err := retry.Do(ctx, retry.Policy{}, func(context.Context) error { calls++; return nil })
	var re *retry.Error
	if calls != 0 || !errors.As(err, &re) || re.Attempts != 0 ||
		!errors.Is(err, retry.ErrCancelled) || !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("Do = %v after %d calls; want ErrCancelled, context.Canceled and the cause, no call", err, calls)
	}
}

// TestBudgetIsTheOperationsDeadline: a call that would run past the budget
// is told so through its context, rather than Do returning only when the
// call does.
func TestBudgetIsTheOperationsDeadline(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Budget: 50 * time.Millisecond}
	var sawDeadline bool
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		sawDeadline = ok && time.Until(d) <= 50*time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return nil
		}
	})
	if !sawDeadline || !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do = %v (deadline seen: %v); want the budget as op's deadline and ErrBudgetExhausted", err, sawDeadline)
	}
}

// TestAttemptTimeoutGivesEachCallADeadline: each call ends at its own
// deadline and is retried, even under a classifier that knows nothing of it.
func TestAttemptTimeoutGivesEachCallADeadline(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 3, AttemptTimeout: 10 * time.Millisecond,
		Classifier: retry.RetryOn(errFlaky), Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}}
	calls := 0
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		<-ctx.Done() // without a deadline of its own, this call never ends
		return ctx.Err()
	})
	if calls != 3 || !errors.Is(err, retry.ErrAttemptsExhausted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do = %v after %d calls, want ErrAttemptsExhausted after 3", err, calls)
	}
}

func TestDoValueIf(t *testing.T) {
	t.Parallel()
	p, clock := setup(t, retry.Policy{MaxAttempts: 3, Backoff: fixedDelays(time.Second)})
	polls := 0
	v, err := retry.DoValueIf(context.Background(), p, func(context.Context) (int, error) { polls++; return polls, nil },
		func(v int) bool { return v < 10 })
	if v != 3 || polls != 3 || !errors.Is(err, retry.ErrAttemptsExhausted) || !errors.Is(err, retry.ErrRejected) {
		t.Errorf("DoValueIf = %d, %v after %d calls; want the last value 3 and ErrAttemptsExhausted wrapping ErrRejected", v, err, polls)
	}
	if fmt.Sprint(clock.Sleeps()) != "[1s 2s]" {
		t.Errorf("sleeps %v, want the backoff's [1s 2s]", clock.Sleeps())
	}
}

func TestDoAttemptTellsTheOperation(t *testing.T) {
	t.Parallel()
	p, clock := setup(t, retry.Policy{MaxAttempts: 3, Backoff: fixedDelays(time.Second)})
	var seen []string
	_, err := retry.DoAttempt(context.Background(), p, func(_ context.Context, a retry.Attempt) (int, error) {
		seen = append(seen, fmt.Sprintf("%d %v %v", a.Number, a.Elapsed, a.LastErr))
		clock.Advance(100 * time.Millisecond)
		return 0, errFlaky
	})
	want := "[1 0s <nil> 2 1.1s flaky 3 3.2s flaky]"
	if fmt.Sprint(seen) != want || !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Errorf("attempts saw %v (%v), want %s", seen, err, want)
	}
}

// TestDelayerChoosesTheWait: a classifier's chosen wait replaces the
// backoff's, and a longer server hint still wins.
func TestDelayerChoosesTheWait(t *testing.T) {
	t.Parallel()
	throttled := func(err error) bool { return errors.Is(err, errFlaky) }
	p, clock := setup(t, retry.Policy{MaxAttempts: 3, Backoff: fixedDelays(time.Millisecond),
		Classifier: retry.Classifiers{retry.RetryAfterIf(throttled, 7*time.Second)}})
	calls := 0
	_ = retry.Do(context.Background(), p, func(context.Context) error {
		calls++
		if calls == 2 {
			return retry.After(9*time.Second, errFlaky)
		}
		return errFlaky
	})
	if fmt.Sprint(clock.Sleeps()) != "[7s 9s]" {
		t.Errorf("sleeps %v, want [7s 9s]", clock.Sleeps())
	}
}

// TestSharedSeededSource: one seeded generator shared by every execution of
// a shared policy is a data race unless it is locked (run with -race).
func TestSharedSeededSource(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 3, Rand: backoff.Locked(rand.NewPCG(1, 2)),
		Backoff: backoff.Policy{Base: time.Nanosecond}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				op, _ := failing(2, errFlaky)
				if err := retry.Do(context.Background(), p, op); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// TestLogSuccessOnlyAfterRetries: a success at the first attempt has nothing
// to tell; one after retries says how many it took.
func TestLogSuccessOnlyAfterRetries(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	p, _ := setup(t, retry.Policy{MaxAttempts: 3, Logger: l, Backoff: fixedDelays(time.Millisecond)})
	_ = retry.Do(context.Background(), p, func(context.Context) error { return nil })
	op, _ := failing(1, errFlaky)
	_ = retry.Do(context.Background(), p, op)
	want := "level=WARN msg=\"attempt 1/3 failed; retrying in 1ms\" error=flaky\nlevel=DEBUG msg=\"attempt 2/3 succeeded\"\n"
	if buf.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
}
