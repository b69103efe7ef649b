package kafkaretry_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	e.produce(t, rec("ledger-1", 0), rec("ledger-2", 1), rec("http-1", 0))
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
			want: kafkaretry.ReplayResult{Scanned: 3, Replayed: 0, To: topic},
		},
		{
			name: "dry run, window from the future",
			opts: kafkaretry.ReplayOptions{Topic: topic, DryRun: true, Since: time.Now().Add(time.Hour)},
			want: kafkaretry.ReplayResult{Scanned: 0, Replayed: 0, To: topic},
		},
		{
			name:       "one error type to the main topic",
			opts:       kafkaretry.ReplayOptions{Topic: topic, ErrorType: "kafkaretry_test.ledgerError", Since: time.Now().Add(-time.Hour)},
			want:       kafkaretry.ReplayResult{Scanned: 3, Replayed: 2, To: topic},
			wantCalled: []string{"ledger-1", "ledger-2"},
		},
		{
			name:       "another to the retry topic",
			opts:       kafkaretry.ReplayOptions{Topic: topic, Target: kafkaretry.ToRetry, ErrorType: "*kafkaretry.HTTPError"},
			want:       kafkaretry.ReplayResult{Scanned: 3, Replayed: 1, To: topic + "-retry"},
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
			}
		})
	}
	if got := len(j.of("http-1")) + len(j.of("ledger-1")) + len(j.of("ledger-2")); got != 6 {
		t.Errorf("%d calls in all, want 6: each record once dead-lettered and once replayed", got)
	}
}
