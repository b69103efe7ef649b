package retry

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// Outcome is how an attempt ended, as an Observer hears it.
type Outcome int

// The outcomes. Every attempt ends in exactly one of them.
const (
	Succeeded Outcome = iota + 1 // it succeeded: Event.Attempt calls in all
	Retrying                     // it failed; another attempt follows after Event.Delay
	GaveUp                       // it failed, or none was made, and the execution stops for Event.Reason
)

// String returns "succeeded", "retrying" or "gave-up".
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Retrying:
		return "retrying"
	case GaveUp:
		return "gave-up"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Event is the end of one attempt: what happened and what comes next.
type Event struct {
	Outcome     Outcome
	Name        string        // Policy.Name
	Attempt     int           // the attempt that ended, 1 for the first call (0: none was made)
	MaxAttempts int           // the cap on attempts
	Err         error         // what the attempt returned; nil when it succeeded
	Duration    time.Duration // how long the attempt took
	Elapsed     time.Duration // from the first call's start to the end of this attempt
	Delay       time.Duration // Retrying: the wait before the next attempt
	Reason      error         // GaveUp: ErrAttemptsExhausted, ErrBudgetExhausted, …
	// Start is when the attempt began, on the Policy's clock (after a
	// retry, the end of the previous attempt plus Delay); the attempt ended
	// at Start+Duration. Zero when no attempt was made, and in events of
	// executors that do not fill it in: a tracer placing a span after the
	// fact needs the attempt's own times, not the time it heard of it.
	Start time.Time
	// Repeated marks a GaveUp event for an attempt already heard of as
	// Retrying: the caller's context ended during the wait that followed.
	// It tells why the execution stopped; a count of attempts skips it.
	Repeated bool
	// Result tells what a successful attempt came to when its executor
	// knows more than "no error", by the methods an error names its status
	// with: retryhttp's has HTTPStatusCode() int (the response's status),
	// retrygrpc's unary calls RPCStatusCode() string ("OK"). Nil otherwise,
	// and for every attempt that failed (Err says it).
	Result any
}

// Observer hears the end of every attempt of every execution of a Policy: the
// hook for logs, metrics and traces. Observe runs on the goroutine that
// runs the execution, before any wait; it must be safe for concurrent use
// when the Policy is shared, and quick.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Observers passes each event to every observer in turn.
type Observers []Observer

// Observe passes e to each observer.
func (os Observers) Observe(ctx context.Context, e Event) {
	for _, o := range os {
		o.Observe(ctx, e)
	}
}

// Log returns an Observer that writes each event to l: a failed attempt at
// Warn ("attempt 1/3 failed; retrying in 182ms"), an execution stopped by
// the caller's cancellation at Info, a success after retries at Debug (a
// first attempt's success, nothing to tell, is not logged). A Policy's
// Logger is this observer.
func Log(l *slog.Logger) Observer { return logObserver{l} }

type logObserver struct{ l *slog.Logger }

func (o logObserver) Observe(ctx context.Context, e Event) {
	level := slog.LevelWarn
	var what string
	switch e.Outcome {
	case Succeeded:
		if e.Attempt <= 1 {
			return
		}
		level, what = slog.LevelDebug, "succeeded"
	case Retrying:
		what = "failed; retrying in " + roundDelay(e.Delay).String()
	default:
		if e.Reason == ErrCancelled {
			level = slog.LevelInfo
		}
		what = "failed; giving up: " + e.Reason.Error()
		if e.Err == nil {
			what = "giving up: " + e.Reason.Error()
		}
	}
	if !o.l.Enabled(ctx, level) {
		return
	}
	msg := "attempt " + strconv.Itoa(e.Attempt) + "/" + strconv.Itoa(e.MaxAttempts) + " " + what
	attrs := make([]slog.Attr, 0, 2)
	if e.Err != nil {
		attrs = append(attrs, slog.Any("error", e.Err))
	}
	if e.Name != "" {
		attrs = append(attrs, slog.String("op", e.Name))
	}
	o.l.LogAttrs(ctx, level, msg, attrs...)
}

// roundDelay keeps log lines readable: 182ms, not 182.417301ms.
func roundDelay(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// OnRetry returns an Observer that calls f before each wait, with the
// Retrying event of the attempt that failed, and hears nothing else.
func OnRetry(f func(ctx context.Context, e Event)) Observer {
	return ObserverFunc(func(ctx context.Context, e Event) {
		if e.Outcome == Retrying {
			f(ctx, e)
		}
	})
}
