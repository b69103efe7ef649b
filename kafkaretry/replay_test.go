package kafkaretry_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/kafkaretry"
)

type ledgerError struct{}

func (ledgerError) Error() string { return "ledger closed" }

// TestReplay dead-letters three records, then republishes some of them,
// filtered by error type and time, to the main topic and to the retry topic.
func TestReplay(t *testing.T) {
	t.Parallel()
	e := setup(t, 2)
	var healed atomic.Bool
	j := newJournal()
	e.run(t, kafkaretry.Config{Handler: j.handler(func(c call) error {
		switch {
		case healed.Load():
			return nil
		case strings.HasPrefix(c.id, "ledger"):
			return retry.Permanent(ledgerError{})
		}
		return &kafkaretry.HTTPError{StatusCode: 400}
	})})
	// The trace context of each record comes back with it.
	parent := kgo.RecordHeader{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}
	e.produce(t, rec("ledger-1", 0, parent), rec("ledger-2", 1, parent), rec("http-1", 0, parent))
	waitFor(t, "three DLQ records", func() bool { return len(e.records(t, kafkaretry.DLQTopic(topic))) == 3 })
	healed.Store(true)

	cl := e.client(t)
	tests := []struct {
		name       string
		opts       kafkaretry.ReplayOptions
		want       kafkaretry.ReplayResult
		wantCalled []string // records handled again, from want.To
	}{
		{
			name: "dry run, window in the past",
			opts: kafkaretry.ReplayOptions{Topic: topic, DryRun: true, Until: time.Now().Add(-time.Hour)},
			want: kafkaretry.ReplayResult{Scanned: 3, Replayed: 0, From: topic + "-dlq", To: topic},
		},
		{
			name: "dry run, window from the future",
			opts: kafkaretry.ReplayOptions{Topic: topic, DryRun: true, Since: time.Now().Add(time.Hour)},
			want: kafkaretry.ReplayResult{Scanned: 0, Replayed: 0, From: topic + "-dlq", To: topic},
		},
		{
			name:       "one error type to the main topic",
			opts:       kafkaretry.ReplayOptions{Topic: topic, ErrorType: "kafkaretry_test.ledgerError", Since: time.Now().Add(-time.Hour)},
			want:       kafkaretry.ReplayResult{Scanned: 3, Replayed: 2, From: topic + "-dlq", To: topic},
			wantCalled: []string{"ledger-1", "ledger-2"},
		},
		{
			name:       "another to the retry topic",
			opts:       kafkaretry.ReplayOptions{Topic: topic, Target: kafkaretry.ToRetry, ErrorType: "*kafkaretry.HTTPError"},
			want:       kafkaretry.ReplayResult{Scanned: 3, Replayed: 1, From: topic + "-dlq", To: topic + "-retry"},
			wantCalled: []string{"http-1"},
		},
	}
	for _, tt := range tests { // in order: each replay adds calls
		t.Run(tt.name, func(t *testing.T) {
			got, err := kafkaretry.Replay(t.Context(), cl, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			for _, id := range tt.wantCalled {
				waitFor(t, id+" handled again", func() bool { return len(j.of(id)) == 2 })
				again := j.of(id)[1]
				if again.topic != tt.want.To {
					t.Errorf("%s handled again from %s, want %s", id, again.topic, tt.want.To)
				}
				wantAttempt := ""
				if tt.opts.Target == kafkaretry.ToRetry {
					wantAttempt = "0"
				}
				if again.attempt != wantAttempt || header(again.rec, kafkaretry.HeaderDLQReason) != "" {
					t.Errorf("%s replayed with x-retry-attempt %q and x-dlq-reason %q, want %q and none",
						id, again.attempt, header(again.rec, kafkaretry.HeaderDLQReason), wantAttempt)
				}
				if got := header(again.rec, parent.Key); got != string(parent.Value) {
					t.Errorf("%s replayed with traceparent %q, want the original's %q", id, got, parent.Value)
				}
			}
		})
	}
	if got := len(j.of("http-1")) + len(j.of("ledger-1")) + len(j.of("ledger-2")); got != 6 {
		t.Errorf("%d calls in all, want 6: each record once dead-lettered and once replayed", got)
	}
}

// TestReplayDedupes fills the DLQ with three copies of one failure (what a
// crash without transactions, or two consumers, can leave), a second
// failure of the same record after one replay, a record from Spring Kafka
// (its identity in kafka_dlt-… headers) twice, and a record with no
// identity headers: Replay republishes each identity once per run.
func TestReplayDedupes(t *testing.T) {
	t.Parallel()
	dlq := kafkaretry.DLQTopic(topic)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic, kafkaretry.RetryTopic(topic, 0), dlq))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{c: c, opts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}
	copyOf := func(key string, replays int) *kgo.Record {
		st := kafkaretry.State{Attempt: 3, OriginalTopic: topic, OriginalPartition: 0, OriginalOffset: 7,
			FirstAttempt: time.Now(), LastErrorType: "boom", DLQReason: "attempts exhausted", Replays: replays}
		return &kgo.Record{Topic: dlq, Key: []byte(key), Headers: st.Headers()}
	}
	spring := func() *kgo.Record {
		return &kgo.Record{Topic: dlq, Key: []byte("spring"), Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte(topic)},
			{Key: "kafka_dlt-original-partition", Value: []byte{0, 0, 0, 0}},
			{Key: "kafka_dlt-original-offset", Value: []byte{0, 0, 0, 0, 0, 0, 0, 9}},
		}}
	}
	e.produce(t, copyOf("a", 0), copyOf("a", 0), copyOf("a", 0), copyOf("a", 1), spring(), spring(),
		&kgo.Record{Topic: dlq, Key: []byte("bare")})
	if got := header(copyOf("a", 1), kafkaretry.HeaderRecordID); got != topic+"/0/7/r1" {
		t.Errorf("x-record-id %q, want %s/0/7/r1", got, topic)
	}

	cl := e.client(t)
	dry, err := kafkaretry.Replay(t.Context(), cl, kafkaretry.ReplayOptions{Topic: topic, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := (kafkaretry.ReplayResult{Scanned: 7, Replayed: 4, Duplicates: 3, From: dlq, To: topic}); dry != want {
		t.Errorf("dry run: %+v, want %+v", dry, want)
	}
	got, err := kafkaretry.Replay(t.Context(), cl, kafkaretry.ReplayOptions{Topic: topic, Target: kafkaretry.ToRetry})
	if err != nil {
		t.Fatal(err)
	}
	retryTopic := kafkaretry.RetryTopic(topic, 0)
	if want := (kafkaretry.ReplayResult{Scanned: 7, Replayed: 4, Duplicates: 3, From: dlq, To: retryTopic}); got != want {
		t.Errorf("replay: %+v, want %+v", got, want)
	}
	ids := map[string]int{}
	for _, r := range e.records(t, retryTopic) {
		ids[header(r, kafkaretry.HeaderRecordID)]++
	}
	want := map[string]int{topic + "/0/7/r1": 1, topic + "/0/7/r2": 1, topic + "/0/9/r1": 1, dlq + "/0/6/r1": 1}
	if len(ids) != len(want) {
		t.Errorf("replayed identities %v, want %v", ids, want)
	}
	for id, n := range want {
		if ids[id] != n {
			t.Errorf("replayed identities %v, want %v", ids, want)
			break
		}
	}
}
