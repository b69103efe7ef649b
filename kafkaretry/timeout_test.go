package kafkaretry_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

// Policy.AttemptTimeout ends a handler that hangs, and the attempt it cut
// short is retried whatever the Classifier says of the error, as retry.Do
// retries it; the Policy's Observer hears each attempt once its copy is in
// Kafka.
func TestAttemptTimeoutEndsAHangingHandler(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	var calls atomic.Int32
	began := time.Now()
	var mu sync.Mutex
	var heard []retry.Event
	e.run(t, kafkaretry.Config{
		Policy: retry.Policy{
			MaxAttempts:    2,
			AttemptTimeout: 50 * time.Millisecond,
			Backoff:        backoff.Policy{Kind: backoff.Fixed, Base: backoff.None},
			Classifier:     retry.ClassifierFunc(func(error) retry.Decision { return retry.NoRetry }),
			Observer: retry.ObserverFunc(func(_ context.Context, ev retry.Event) {
				mu.Lock()
				heard = append(heard, ev)
				mu.Unlock()
			}),
		},
		Handler: func(ctx context.Context, _ *kgo.Record) error {
			calls.Add(1)
			<-ctx.Done()
			return ctx.Err()
		},
	})
	e.produce(t, rec("a", 0))
	waitFor(t, "a DLQ record", func() bool { return len(e.records(t, kafkaretry.DLQTopic(topic))) == 1 })

	if got := calls.Load(); got != 2 {
		t.Errorf("handled %d times, want 2", got)
	}
	d := e.records(t, kafkaretry.DLQTopic(topic))[0]
	if got := header(d, kafkaretry.HeaderDLQReason); got != retry.ErrAttemptsExhausted.Error() {
		t.Errorf("DLQ reason %q, want %q", got, retry.ErrAttemptsExhausted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 2 || heard[0].Outcome != retry.Retrying || heard[1].Outcome != retry.GaveUp ||
		heard[1].Reason != retry.ErrAttemptsExhausted {
		t.Fatalf("the Observer heard %+v, want a retry then a give-up (attempts exhausted)", heard)
	}
	for _, ev := range heard {
		if ev.Duration < 50*time.Millisecond || ev.Duration > 5*time.Second {
			t.Errorf("attempt %d took %v, want about the 50ms AttemptTimeout", ev.Attempt, ev.Duration)
		}
		// Start is when the attempt ran, though it is heard after its forward.
		if ev.Start.Before(began) || ev.Start.After(time.Now().Add(-ev.Duration)) {
			t.Errorf("attempt %d started at %v, want between the test's start %v and its end minus its duration", ev.Attempt, ev.Start, began)
		}
	}
	if heard[1].Start.Before(heard[0].Start.Add(heard[0].Duration)) {
		t.Errorf("attempt 2 started at %v, before attempt 1 ended (%v + %v)", heard[1].Start, heard[0].Start, heard[0].Duration)
	}
}
