package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrytest"
)

var errFlaky = errors.New("flaky")

// fixedDelays is a policy whose delays are exact: base·2^(n−1), no jitter.
func fixedDelays(base time.Duration) backoff.Policy {
	return backoff.Policy{Base: base, Jitter: backoff.NoJitter}
}

// setup returns a policy on a fake clock, and the clock.
func setup(t *testing.T, p retry.Policy) (retry.Policy, *retrytest.Clock) {
	t.Helper()
	clock := retrytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.Clock = clock
	return p, clock
}

// failing returns an operation that fails n times with err, then succeeds,
// and a pointer to its call count.
func failing(n int, err error) (func(context.Context) error, *int) {
	calls := 0
	return func(context.Context) error {
		calls++
		if calls <= n {
			return err
		}
		return nil
	}, &calls
}

func TestDoSucceedsAfterFailures(t *testing.T) {
	t.Parallel()
	p, clock := setup(t, retry.Policy{MaxAttempts: 5, Backoff: fixedDelays(100 * time.Millisecond)})
	op, calls := failing(3, errFlaky)
	if err := retry.Do(context.Background(), p, op); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	if *calls != 4 {
		t.Errorf("calls = %d, want 4", *calls)
	}
	got, want := fmt.Sprint(clock.Sleeps()), "[100ms 200ms 400ms]"
	if got != want {
		t.Errorf("sleeps = %s, want %s", got, want)
	}
}

func TestDoStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		policy       retry.Policy
		err          error
		wantReason   error
		wantAttempts int
	}{
		{"attempts exhausted", retry.Policy{MaxAttempts: 3}, errFlaky, retry.ErrAttemptsExhausted, 3},
		{"default attempts", retry.Policy{}, errFlaky, retry.ErrAttemptsExhausted, retry.DefaultMaxAttempts},
		{"one attempt", retry.Policy{MaxAttempts: 1}, errFlaky, retry.ErrAttemptsExhausted, 1},
		{"permanent", retry.Policy{MaxAttempts: 5}, retry.Permanent(errFlaky), retry.ErrNotRetryable, 1},
		{"classifier says no", retry.Policy{MaxAttempts: 5, Classifier: retry.RetryOn(context.DeadlineExceeded)}, errFlaky, retry.ErrNotRetryable, 1},
		{"status 400", retry.Policy{MaxAttempts: 5}, statusError(400), retry.ErrNotRetryable, 1},
		{"status 503", retry.Policy{MaxAttempts: 5}, statusError(503), retry.ErrAttemptsExhausted, 5},
		{"status 503 not listed", retry.Policy{MaxAttempts: 5, RetryableStatusCodes: []int{429}}, statusError(503), retry.ErrNotRetryable, 1},
		{"self-classified", retry.Policy{MaxAttempts: 5}, selfClassified(false), retry.ErrNotRetryable, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, tt.policy)
			op, calls := failing(1000, tt.err)
			err := retry.Do(context.Background(), p, op)
			if !errors.Is(err, tt.wantReason) {
				t.Errorf("Do = %v, want reason %v", err, tt.wantReason)
			}
			if !errors.Is(err, errFlaky) && !errors.As(err, new(statusError)) && !errors.As(err, new(selfClassified)) {
				t.Errorf("Do = %v, does not wrap the operation's error", err)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != tt.wantAttempts || *calls != tt.wantAttempts {
				t.Errorf("attempts: error says %v, calls %d; want %d", re, *calls, tt.wantAttempts)
			}
		})
	}
}

type statusError int

func (s statusError) Error() string       { return fmt.Sprintf("status %d", int(s)) }
func (s statusError) HTTPStatusCode() int { return int(s) }

type selfClassified bool

func (s selfClassified) Error() string   { return "self-classified" }
func (s selfClassified) Retryable() bool { return bool(s) }

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, retry.Policy{MaxAttempts: 2})
	err := retry.Do(context.Background(), p, func(context.Context) error { return errFlaky })
	if got, want := err.Error(), "retry: attempts exhausted after 2 attempts: flaky"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestDoValue(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, retry.Policy{MaxAttempts: 3})
	calls := 0
	got, err := retry.DoValue(context.Background(), p, func(context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "partial", errFlaky
		}
		return "done", nil
	})
	if got != "done" || err != nil {
		t.Errorf("DoValue = %q, %v; want done, nil", got, err)
	}
	got, err = retry.DoValue(context.Background(), p, func(context.Context) (string, error) { return "partial", errFlaky })
	if got != "" || !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Errorf("DoValue = %q, %v; want the zero value and ErrAttemptsExhausted", got, err)
	}
}

// TestCancelDuringSleep uses the real clock: a one-hour delay must end the
// moment the caller cancels, leaving no goroutine behind.
func TestCancelDuringSleep(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("caller went away")
	p := retry.Policy{MaxAttempts: 5, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Hour, Max: backoff.None, Jitter: backoff.NoJitter}}
	calls := 0
	p.Observer = retry.ObserverFunc(func(context.Context, retry.Event) { go cancel(cause) })
	start := time.Now()
	err := retry.Do(ctx, p, func(context.Context) error { calls++; return errFlaky })
	if time.Since(start) > time.Minute {
		t.Fatalf("Do slept through the cancellation")
	}
	if !errors.Is(err, retry.ErrCancelled) || !errors.Is(err, cause) || !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
		t.Errorf("Do = %v, want ErrCancelled wrapping the cause, context.Canceled and the last error", err)
	}
	if calls != 1 {
		t.Errorf("calls = %d, want 1", calls)
	}
	// The cancel goroutine may still be finishing; give it a moment.
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines: %d before Do, %d after", before, after)
	}
}

func TestCallerCancellationIsNeverRetried(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	p, _ := setup(t, retry.Policy{MaxAttempts: 5, Classifier: retry.Transient()})
	calls := 0
	err := retry.Do(ctx, p, func(ctx context.Context) error {
		calls++
		cancel()
		return ctx.Err()
	})
	if calls != 1 || !errors.Is(err, retry.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v after %d calls, want ErrCancelled after 1", err, calls)
	}
}

// TestAttemptTimeoutIsRetried: a deadline that is the operation's own (a
// per-attempt timeout) is transient, unlike the caller's.
func TestAttemptTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, retry.Policy{MaxAttempts: 3, Classifier: retry.Transient()})
	op, calls := failing(2, fmt.Errorf("attempt: %w", context.DeadlineExceeded))
	if err := retry.Do(context.Background(), p, op); err != nil || *calls != 3 {
		t.Errorf("Do = %v after %d calls, want success after 3", err, *calls)
	}
}

func TestDeadlineTooSoonForNextDelay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	p := retry.Policy{MaxAttempts: 5, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 2 * time.Hour, Max: backoff.None, Jitter: backoff.NoJitter}}
	op, calls := failing(10, errFlaky)
	err := retry.Do(ctx, p, op)
	if !errors.Is(err, retry.ErrBudgetExhausted) || *calls != 1 {
		t.Errorf("Do = %v after %d calls, want ErrBudgetExhausted after 1", err, *calls)
	}
}

func TestObserverHearsEveryAttempt(t *testing.T) {
	t.Parallel()
	var got []string
	var t0 time.Time
	p, clock := setup(t, retry.Policy{
		Name: "charge", MaxAttempts: 3, Budget: time.Minute, Backoff: fixedDelays(10 * time.Millisecond),
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
			got = append(got, fmt.Sprintf("%s %s %d/%d err=%v start=%v took=%v elapsed=%v delay=%v reason=%v",
				e.Outcome, e.Name, e.Attempt, e.MaxAttempts, e.Err, e.Start.Sub(t0), e.Duration, e.Elapsed, e.Delay, e.Reason))
		}),
	})
	t0 = clock.Now()
	calls := 0
	op := func(context.Context) error {
		calls++
		clock.Advance(time.Millisecond)
		if calls < 3 {
			return errFlaky
		}
		return nil
	}
	if err := retry.Do(context.Background(), p, op); err != nil {
		t.Fatal(err)
	}
	_ = retry.Do(context.Background(), p, func(context.Context) error { return retry.Permanent(errFlaky) })
	want := []string{
		"retrying charge 1/3 err=flaky start=0s took=1ms elapsed=1ms delay=10ms reason=<nil>",
		"retrying charge 2/3 err=flaky start=11ms took=1ms elapsed=12ms delay=20ms reason=<nil>",
		"succeeded charge 3/3 err=<nil> start=32ms took=1ms elapsed=33ms delay=0s reason=<nil>",
		"gave-up charge 1/3 err=flaky start=33ms took=0s elapsed=0s delay=0s reason=error not retryable",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("observer heard\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestObserverHearsCancelledWait: an execution cancelled during a wait
// ends with a GaveUp event for the attempt already heard of as Retrying,
// marked Repeated, so that counters of attempts count it once; a GaveUp of
// its own attempt is not marked.
func TestObserverHearsCancelledWait(t *testing.T) {
	t.Parallel()
	type heard struct {
		outcome  retry.Outcome
		attempt  int
		reason   error
		repeated bool
	}
	tests := []struct {
		name string
		// cancelAt is the attempt whose Retrying event cancels the caller's
		// context, or whose call does when during is false.
		cancelAt int
		during   bool
		want     []heard
	}{
		{"during the wait", 1, true, []heard{{retry.Retrying, 1, nil, false}, {retry.GaveUp, 1, retry.ErrCancelled, true}}},
		{"during the attempt", 2, false, []heard{{retry.Retrying, 1, nil, false}, {retry.GaveUp, 2, retry.ErrCancelled, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got []heard
			p, _ := setup(t, retry.Policy{MaxAttempts: 3, Backoff: fixedDelays(time.Millisecond),
				Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) {
					got = append(got, heard{e.Outcome, e.Attempt, e.Reason, e.Repeated})
					if tt.during && e.Attempt == tt.cancelAt {
						cancel()
					}
				})})
			calls := 0
			err := retry.Do(ctx, p, func(context.Context) error {
				if calls++; !tt.during && calls == tt.cancelAt {
					cancel()
				}
				return errFlaky
			})
			if !errors.Is(err, retry.ErrCancelled) {
				t.Errorf("Do = %v, want ErrCancelled", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("observer heard %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	p, _ := setup(t, retry.Policy{Name: "fetch", MaxAttempts: 2, Backoff: fixedDelays(182 * time.Millisecond), Logger: logger})
	_ = retry.Do(context.Background(), p, func(context.Context) error { return errFlaky })
	want := `level=WARN msg="attempt 1/2 failed; retrying in 182ms" error=flaky op=fetch
level=WARN msg="attempt 2/2 failed; giving up: attempts exhausted" error=flaky op=fetch
`
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func TestSharedPolicyIsNotMutated(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Base: time.Microsecond, Jitter: backoff.DecorrelatedJitter}}
	before := fmt.Sprintf("%+v", p)
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				op, _ := failing(2, errFlaky)
				if err := retry.Do(context.Background(), p, op); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if after := fmt.Sprintf("%+v", p); after != before {
		t.Errorf("policy changed from %s to %s", before, after)
	}
}

func TestAllocations(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	tests := []struct {
		name   string
		policy retry.Policy
		op     func() func(context.Context) error
		max    float64
	}{
		{"success", retry.Policy{}, func() func(context.Context) error { return ok }, 0},
		// The budget's deadline on op's context is a context.WithTimeout.
		{"success with budget", retry.Policy{Budget: time.Second}, func() func(context.Context) error { return ok }, 4},
		{"one retry, zero delay", retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}}, func() func(context.Context) error {
			n := 0
			return func(context.Context) error {
				n++
				if n%2 == 1 {
					return errFlaky
				}
				return nil
			}
		}, 0},
	}
	for _, tt := range tests {
		op := tt.op()
		allocs := testing.AllocsPerRun(1000, func() { _ = retry.Do(ctx, tt.policy, op) })
		if allocs > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, allocs, tt.max)
		}
	}
}

func TestStringers(t *testing.T) {
	t.Parallel()
	got := strings.Join([]string{retry.Unknown.String(), retry.Retry.String(), retry.NoRetry.String()}, ",")
	if got != "unknown,retry,no-retry" {
		t.Errorf("Decision strings = %s", got)
	}
}

// lateTimerContext has a deadline that has passed but, like a context whose
// timer has not fired yet, reports no error.
type lateTimerContext struct{ context.Context }

func (lateTimerContext) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestPassedDeadlineIsTheCallers: a server can notice the caller's deadline
// before the caller's own timer fires; the DEADLINE_EXCEEDED it answers is
// still the caller's and is not retried.
func TestPassedDeadlineIsTheCallers(t *testing.T) {
	t.Parallel()
	p, clock := setup(t, retry.Policy{MaxAttempts: 5, Classifier: retry.Transient()})
	op, calls := failing(5, context.DeadlineExceeded)
	err := retry.Do(lateTimerContext{context.Background()}, p, op)
	if !errors.Is(err, retry.ErrCancelled) || *calls != 1 || len(clock.Sleeps()) != 0 {
		t.Errorf("Do = %v after %d calls, want ErrCancelled after 1", err, *calls)
	}
}
