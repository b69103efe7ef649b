package kafkaretry

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// run is one record taken through a Processor's attempts without a broker:
// each failure settled into the copy handle would forward, that copy read
// back by admit as the retry consumer would read it (headers and all), the
// fake clock moved by each call and on to each x-process-after.
type run struct {
	p       *Processor
	clk     *retrytest.Clock
	events  []retry.Event
	reg     *prometheus.Registry
	waits   []time.Duration
	topics  []string    // where each failed attempt's copy went
	last    *kgo.Record // the last copy forwarded; nil when the record never failed
	n       int         // attempts made
	logs    bytes.Buffer
	procLog bytes.Buffer
}

func newRun(t *testing.T, cfg Config) *run {
	t.Helper()
	r := &run{clk: retrytest.NewClock(time.UnixMilli(1_700_000_000_000)), reg: prometheus.NewRegistry()}
	cfg.Topic, cfg.Group, cfg.Registerer = "orders", "billing", r.reg
	cfg.Handler = func(context.Context, *kgo.Record) error { return nil } // settle is given the results
	cfg.Logger = slog.New(slog.NewTextHandler(&r.procLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Policy.Clock = r.clk
	cfg.Policy.Observer = retry.ObserverFunc(func(_ context.Context, e retry.Event) { r.events = append(r.events, e) })
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	return r
}

// attempts makes attempts until the record succeeds or is dead-lettered;
// attempt n took took(n) and returned result(n).
func (r *run) attempts(t *testing.T, result func(n int) error, took func(n int) time.Duration) {
	t.Helper()
	it := item{rec: &kgo.Record{Topic: "orders", Partition: 1, Offset: 7, Key: []byte("k"), Value: []byte("v"), Timestamp: r.clk.Now()}}
	for r.n = 1; r.n < 100; r.n++ {
		start := r.clk.Now()
		r.clk.Advance(took(r.n))
		fwd, e := r.p.settle(it, result(r.n), retry.Unknown, start)
		r.p.observe(t.Context(), it.rec, fwd, e)
		if fwd == nil {
			return
		}
		r.last, r.topics = fwd, append(r.topics, fwd.Topic)
		if fwd.Topic == r.p.dlq {
			return
		}
		st, err := ReadState(fwd)
		if err != nil {
			t.Fatalf("attempt %d's copy: %v", r.n, err)
		}
		wait := st.ProcessAfter.Sub(r.clk.Now())
		r.waits = append(r.waits, wait)
		r.clk.Advance(wait)
		it = r.p.admit(fwd, r.clk.Now())
	}
	t.Fatal("no end after 100 attempts")
}

// TestSettleFollowsStepCases runs the decision step's table through the
// Processor: a record must wait exactly what retry.Do sleeps and be
// dead-lettered for the same reason, and the Policy's Observer and the
// metrics must hear the same. A case's HTTP answers reach the Processor
// as a handler's errors do: Result.Err, an error carrying the status and
// the Retry-After.
func TestSettleFollowsStepCases(t *testing.T) {
	t.Parallel()
	for _, c := range retrytest.StepCases() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			r := newRun(t, Config{Policy: c.Policy})
			res := func(n int) retrytest.Result { return c.Results[min(n, len(c.Results))-1] }
			r.attempts(t, func(n int) error { return res(n).Err() }, func(n int) time.Duration { return res(n).Took })

			if fmt.Sprint(r.waits) != fmt.Sprint(c.Delays) {
				t.Errorf("waits %v, want %v", r.waits, c.Delays)
			}
			if want := len(c.Delays) + 1; r.n != want {
				t.Errorf("%d attempts, want %d", r.n, want)
			}
			var heard []time.Duration
			for _, e := range r.events {
				if e.Outcome == retry.Retrying {
					heard = append(heard, e.Delay)
				}
			}
			if fmt.Sprint(heard) != fmt.Sprint(c.Delays) {
				t.Errorf("the Observer heard delays %v, want %v", heard, c.Delays)
			}
			end := r.events[len(r.events)-1]
			if c.Reason == nil {
				if end.Outcome != retry.Succeeded {
					t.Errorf("last event %v, want succeeded", end.Outcome)
				}
				return
			}
			if r.last.Topic != "orders-dlq" || header(r.last, HeaderDLQReason) != c.Reason.Error() {
				t.Errorf("last copy to %s with reason %q, want orders-dlq with %q", r.last.Topic, header(r.last, HeaderDLQReason), c.Reason)
			}
			if end.Outcome != retry.GaveUp || end.Reason != c.Reason || end.Attempt != r.n {
				t.Errorf("last event %v %v after attempt %d, want gave-up %v after %d", end.Outcome, end.Reason, end.Attempt, c.Reason, r.n)
			}
			retried := r.counter(t, "kafkaretry_records_retried_total", "orders-retry")
			dead := r.counter(t, "kafkaretry_records_dead_lettered_total", c.Reason.Error())
			if retried != float64(len(c.Delays)) || dead != 1 {
				t.Errorf("metrics: %v retried, %v dead-lettered; want %d, 1", retried, dead, len(c.Delays))
			}
		})
	}
}

// Tiers are the backoff: retry n waits tier n (the last for later ones),
// however long, in tier n's topic.
func TestSettleTiers(t *testing.T) {
	t.Parallel()
	r := newRun(t, Config{Policy: retry.Policy{MaxAttempts: 5}, Tiers: []time.Duration{time.Minute, time.Hour}})
	r.attempts(t, func(int) error { return errFlakyInternal }, func(int) time.Duration { return 0 })
	if want := []time.Duration{time.Minute, time.Hour, time.Hour, time.Hour}; fmt.Sprint(r.waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", r.waits, want)
	}
	want := []string{"orders-retry-1", "orders-retry-2", "orders-retry-2", "orders-retry-2", "orders-dlq"}
	if fmt.Sprint(r.topics) != fmt.Sprint(want) {
		t.Errorf("copies went to %v, want %v", r.topics, want)
	}
	if got := r.counter(t, "kafkaretry_records_retried_total", "orders-retry-2"); got != 3 {
		t.Errorf("%v retried to orders-retry-2, want 3", got)
	}
}

// With a Policy.Logger, every attempt is logged there once, as retry.Log
// logs it, with the record's place; the Processor's logger does not repeat
// the dead letter. Without one, the Processor's logger says it.
func TestSettleLogsEachAttemptOnce(t *testing.T) {
	t.Parallel()
	var policyLog bytes.Buffer
	pol := retry.Policy{MaxAttempts: 2, Name: "charge", Logger: slog.New(slog.NewTextHandler(&policyLog, nil))}
	r := newRun(t, Config{Policy: pol})
	r.attempts(t, func(int) error { return errFlakyInternal }, func(int) time.Duration { return 0 })
	lines := strings.Split(strings.TrimSpace(policyLog.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "attempt 1/2 failed; retrying in") ||
		!strings.Contains(lines[1], "attempt 2/2 failed; giving up: attempts exhausted") {
		t.Fatalf("Policy.Logger wrote:\n%s\nwant a retry and a give-up", policyLog.String())
	}
	for _, want := range []string{"op=charge", "topic=orders-retry", "to=orders-dlq"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("the give-up line %q lacks %s", lines[1], want)
		}
	}
	if strings.Contains(r.procLog.String(), "dead-lettered") {
		t.Errorf("the Processor's logger repeated the dead letter:\n%s", r.procLog.String())
	}

	r = newRun(t, Config{Policy: retry.Policy{MaxAttempts: 2}})
	r.attempts(t, func(int) error { return errFlakyInternal }, func(int) time.Duration { return 0 })
	if got := r.procLog.String(); strings.Count(got, "kafkaretry: dead-lettered: attempts exhausted") != 1 {
		t.Errorf("without a Policy.Logger the Processor's logger wrote:\n%s\nwant the dead letter once", got)
	}
}

// counter returns the value of counter name whose variable label is
// value, or 0.
func (r *run) counter(t *testing.T, name, value string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "topic" && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

var errFlakyInternal = fmt.Errorf("flaky downstream")

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}
