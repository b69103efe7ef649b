package kafkaretry_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
	"github.com/retrykit/retry/retrytest"
)

// processAfter returns the x-process-after of r as a time.
func processAfter(t *testing.T, r *kgo.Record) time.Time {
	t.Helper()
	ms, err := strconv.ParseInt(header(r, kafkaretry.HeaderProcessAfter), 10, 64)
	if err != nil {
		t.Fatalf("%s of %s/%d: %v", kafkaretry.HeaderProcessAfter, r.Topic, r.Offset, err)
	}
	return time.UnixMilli(ms)
}

// TestDelayAccuracyFakeClock runs delays of tens of minutes on an injected
// clock: the retry consumer's wait for the held record is the clock's Sleep,
// so the test takes no real time and the lateness is exact.
func TestDelayAccuracyFakeClock(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	clk := retrytest.NewClock(time.UnixMilli(1_700_000_000_000))
	j := newJournal()
	j.now = clk.Now
	reg := prometheus.NewRegistry()
	e.run(t, kafkaretry.Config{
		Policy: retry.Policy{
			MaxAttempts: 4,
			Backoff:     backoff.Policy{Kind: backoff.Exponential, Base: 10 * time.Minute, Max: 2 * time.Hour, Jitter: backoff.NoJitter},
			Clock:       clk,
		},
		Handler:    j.handler(func(call) error { return errFlaky }),
		Registerer: reg,
	})
	e.produce(t, rec("a", 0))
	waitFor(t, "four attempts", func() bool { return len(j.of("a")) == 4 })

	calls := j.of("a")
	wantDelays := []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute}
	for i, c := range calls[1:] {
		due := processAfter(t, c.rec)
		if got, want := due.Sub(calls[i].at), wantDelays[i]; got != want {
			t.Errorf("attempt %d due %v after attempt %d, want %v", i+2, got, i+1, want)
		}
		if c.at.Before(due) {
			t.Errorf("attempt %d handled at %v, before its x-process-after %v", i+2, c.at, due)
		}
		if late := c.at.Sub(due); late > time.Second {
			t.Errorf("attempt %d handled %v after its x-process-after, want at most 1s", i+2, late)
		}
	}
	if got := metric(t, reg, "kafkaretry_delay_accuracy_seconds"); got != 3 {
		t.Errorf("delay accuracy observations = %v, want 3", got)
	}
}

// TestDelayAccuracyRealClock checks the same on the wall clock with short
// delays: never before x-process-after, and not late by more than a loose
// bound (a loaded machine runs this test).
func TestDelayAccuracyRealClock(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	j := newJournal()
	e.run(t, kafkaretry.Config{
		Policy: retry.Policy{
			MaxAttempts: 3,
			Backoff:     backoff.Policy{Kind: backoff.Linear, Base: 200 * time.Millisecond, Jitter: backoff.FullJitter},
		},
		Handler: j.handler(func(call) error { return errFlaky }),
	})
	ids := []string{"a", "b", "c", "d"}
	for i, id := range ids {
		e.produce(t, rec(id, int32(i%2)))
	}
	waitFor(t, "three attempts each", func() bool { return len(j.all()) == 3*len(ids) })

	for _, c := range j.all() {
		if c.topic == topic {
			continue
		}
		due := processAfter(t, c.rec)
		if c.at.Before(due) {
			t.Errorf("%s attempt %s handled at %v, before its x-process-after %v", c.id, c.attempt, c.at, due)
		}
		if late := c.at.Sub(due); late > 5*time.Second {
			t.Errorf("%s attempt %s handled %v late", c.id, c.attempt, late)
		}
	}
}
