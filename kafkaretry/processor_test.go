package kafkaretry_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

func TestSuccessHandledOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, 3)
	j := newJournal()
	reg := prometheus.NewRegistry()
	e.run(t, kafkaretry.Config{Handler: j.handler(func(call) error { return nil }), Registerer: reg})

	const n = 12
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, rec("id-"+strconv.Itoa(i), int32(i%3)))
	}
	e.produce(t, rs...)
	waitFor(t, "the main group to commit every record", func() bool {
		c := e.committed(t, group, topic)
		return c[0] == n/3 && c[1] == n/3 && c[2] == n/3
	})

	for i := range n {
		id := "id-" + strconv.Itoa(i)
		if got := len(j.of(id)); got != 1 {
			t.Errorf("%s handled %d times, want 1", id, got)
		}
	}
	for _, tp := range []string{kafkaretry.RetryTopic(topic, 0), kafkaretry.DLQTopic(topic)} {
		if got := len(e.records(t, tp)); got != 0 {
			t.Errorf("%s has %d records, want 0", tp, got)
		}
	}
	if got := metric(t, reg, "kafkaretry_records_retried_total"); got != 0 {
		t.Errorf("retried_total = %v, want 0", got)
	}
}

func TestRetryTiersInOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	j := newJournal()
	const fails = 4
	e.run(t, kafkaretry.Config{
		Policy: retry.Policy{MaxAttempts: fails + 1},
		Tiers:  []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 60 * time.Millisecond},
		Handler: j.handler(func(c call) error {
			if len(j.of(c.id)) <= fails {
				return fmt.Errorf("call %d: %w", len(j.of(c.id)), errFlaky)
			}
			return nil
		}),
	})
	user := []kgo.RecordHeader{{Key: "trace-id", Value: []byte("t-1")}, {Key: "tenant", Value: []byte("acme")}}
	e.produce(t, rec("a", 1, user...))
	waitFor(t, "five calls", func() bool { return len(j.of("a")) == fails+1 })

	calls := j.of("a")
	var gotTopics, gotAttempts []string
	for _, c := range calls {
		gotTopics = append(gotTopics, c.topic)
		gotAttempts = append(gotAttempts, c.attempt)
	}
	wantTopics := fmt.Sprint([]string{topic, topic + "-retry-1", topic + "-retry-2", topic + "-retry-3", topic + "-retry-3"})
	if got := fmt.Sprint(gotTopics); got != wantTopics {
		t.Errorf("topics visited %s, want %s", got, wantTopics)
	}
	if got, want := fmt.Sprint(gotAttempts), fmt.Sprint([]string{"", "1", "2", "3", "4"}); got != want {
		t.Errorf("x-retry-attempt seen %s, want %s", got, want)
	}
	orig := calls[0].rec
	for _, c := range calls[1:] {
		r := c.rec
		if string(r.Key) != "a" || string(r.Value) != "value-a" {
			t.Errorf("%s: key %q value %q, want the original", r.Topic, r.Key, r.Value)
		}
		if got, want := fmt.Sprint(r.Headers[:2]), fmt.Sprint(user); got != want {
			t.Errorf("%s: first headers %s, want the user's %s", r.Topic, got, want)
		}
		seen := make(map[string]bool)
		for _, h := range r.Headers {
			if seen[h.Key] {
				t.Errorf("%s: header %s appears twice", r.Topic, h.Key)
			}
			seen[h.Key] = true
		}
		for k, want := range map[string]string{
			kafkaretry.HeaderOriginalTopic:     topic,
			kafkaretry.HeaderOriginalPartition: "1",
			kafkaretry.HeaderOriginalOffset:    strconv.FormatInt(orig.Offset, 10),
			kafkaretry.HeaderLastErrorType:     "*errors.errorString",
		} {
			if got := header(r, k); got != want {
				t.Errorf("%s: %s = %q, want %q", r.Topic, k, got, want)
			}
		}
		if got := header(r, kafkaretry.HeaderFirstAttempt); got == "" {
			t.Errorf("%s: no %s", r.Topic, kafkaretry.HeaderFirstAttempt)
		}
	}
	if got := len(e.records(t, kafkaretry.DLQTopic(topic))); got != 0 {
		t.Errorf("DLQ has %d records, want 0", got)
	}
}

func TestRetryTopicWithoutTiers(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	j := newJournal()
	e.run(t, kafkaretry.Config{
		Policy: retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Exponential, Base: 10 * time.Millisecond, Jitter: backoff.DecorrelatedJitter, Max: time.Second}},
		Handler: j.handler(func(c call) error {
			if c.topic == topic {
				return errFlaky
			}
			return nil
		}),
	})
	e.produce(t, rec("a", 0))
	waitFor(t, "the retry", func() bool { return len(j.of("a")) == 2 })
	r := j.of("a")[1].rec
	if got, want := r.Topic, topic+"-retry"; got != want {
		t.Errorf("retried from %s, want %s", got, want)
	}
	prev, err := strconv.Atoi(header(r, kafkaretry.HeaderPrevDelay))
	if err != nil || prev < 10 || prev > 30 {
		t.Errorf("%s = %q, want the decorrelated delay, in [10, 30] ms", kafkaretry.HeaderPrevDelay, header(r, kafkaretry.HeaderPrevDelay))
	}
}
