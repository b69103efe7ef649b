package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
)

// An operation that fails twice, under a caller's span: three attempt
// spans, children of the caller's, each with its attempt, its outcome and
// the wait that followed it.
func ExampleObserver() {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	obs, err := retryotel.NewObserver(retryotel.Config{TracerProvider: tp})
	if err != nil {
		panic(err)
	}

	ctx, caller := tp.Tracer("example").Start(context.Background(), "checkout")
	p := retry.Policy{
		Name:        "charge",
		Observer:    obs,
		Backoff:     backoff.Policy{Base: 100 * time.Millisecond, Jitter: backoff.NoJitter},
		Clock:       retrytest.NewClock(time.Now()), // sleeps that take no time, for the example
		MaxAttempts: 3,
	}
	calls := 0
	err = retry.Do(ctx, p, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	caller.End()
	fmt.Println("Do:", err)

	for _, s := range exporter.GetSpans() {
		line := s.Name
		for _, a := range s.Attributes {
			switch a.Key {
			case retryotel.AttemptKey, retryotel.OutcomeKey, retryotel.DelayKey:
				line += fmt.Sprintf(" %s=%s", a.Key, a.Value.String())
			}
		}
		if s.Parent.SpanID() == caller.SpanContext().SpanID() {
			line += " (child of checkout)"
		}
		fmt.Println(line, s.Status.Code)
	}
	// Output:
	// Do: <nil>
	// retry.attempt retry.attempt=1 retry.outcome=retrying retry.delay=0.1 (child of checkout) Error
	// retry.attempt retry.attempt=2 retry.outcome=retrying retry.delay=0.2 (child of checkout) Error
	// retry.attempt retry.attempt=3 retry.outcome=succeeded (child of checkout) Unset
	// checkout Unset
}
