package kafkaretry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

func TestDeadLetter(t *testing.T) {
	t.Parallel()
	// "é" takes 2 bytes: after the "a", a cut at MaxErrorBytes would split one.
	long := "a" + strings.Repeat("é", kafkaretry.MaxErrorBytes)
	wantLong := long[:kafkaretry.MaxErrorBytes-1]
	huge := strings.Repeat("x", 3*kafkaretry.MaxErrorBytes)
	tests := []struct {
		name        string
		err         error
		wantCalls   int
		wantMessage string // "" means err's text
		wantReason  string
		wantStatus  string
		wantBody    string
		wantRetried float64
	}{
		{name: "attempts exhausted", err: fmt.Errorf("charging: %w", errFlaky), wantCalls: 3, wantReason: "attempts exhausted", wantRetried: 2},
		{name: "permanent", err: retry.Permanent(errFlaky), wantCalls: 1, wantReason: "error not retryable"},
		{name: "http 400", err: &kafkaretry.HTTPError{StatusCode: 400, Body: []byte(`{"error":"bad card"}`)},
			wantCalls: 1, wantReason: "error not retryable", wantStatus: "400", wantBody: `{"error":"bad card"}`},
		{name: "http 503 with a long body", err: &kafkaretry.HTTPError{StatusCode: 503, Body: []byte(long)},
			wantCalls: 3, wantReason: "attempts exhausted", wantStatus: "503", wantBody: wantLong, wantRetried: 2},
		{name: "long message", err: retry.Permanent(errors.New(huge)), wantCalls: 1, wantReason: "error not retryable",
			wantMessage: huge[:kafkaretry.MaxErrorBytes]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 2)
			j := newJournal()
			reg := prometheus.NewRegistry()
			e.run(t, kafkaretry.Config{
				Policy:     retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Jitter: backoff.NoJitter}},
				Handler:    j.handler(func(call) error { return tt.err }),
				Registerer: reg,
			})
			user := kgo.RecordHeader{Key: "trace-id", Value: []byte("t-9")}
			e.produce(t, rec("a", 1, user))
			waitFor(t, "a DLQ record", func() bool { return len(e.records(t, kafkaretry.DLQTopic(topic))) == 1 })

			if got := len(j.of("a")); got != tt.wantCalls {
				t.Errorf("handled %d times, want %d", got, tt.wantCalls)
			}
			d := e.records(t, kafkaretry.DLQTopic(topic))[0]
			if string(d.Key) != "a" || string(d.Value) != "value-a" {
				t.Errorf("DLQ key %q value %q, want the original", d.Key, d.Value)
			}
			if len(d.Headers) == 0 || d.Headers[0].Key != user.Key || string(d.Headers[0].Value) != string(user.Value) {
				t.Errorf("DLQ headers %v, want the user's first", d.Headers)
			}
			wantMessage := tt.wantMessage
			if wantMessage == "" {
				wantMessage = tt.err.Error()
			}
			for k, want := range map[string]string{
				kafkaretry.HeaderRetryAttempt:      strconv.Itoa(tt.wantCalls),
				kafkaretry.HeaderDLQReason:         tt.wantReason,
				kafkaretry.HeaderOriginalTopic:     topic,
				kafkaretry.HeaderOriginalPartition: "1",
				kafkaretry.HeaderOriginalOffset:    "0",
				kafkaretry.HeaderLastErrorMessage:  wantMessage,
				kafkaretry.HeaderAPIStatusCode:     tt.wantStatus,
				kafkaretry.HeaderAPIResponse:       tt.wantBody,
				kafkaretry.HeaderProcessAfter:      "",
			} {
				if got := header(d, k); got != want {
					t.Errorf("DLQ %s = %.60q, want %.60q", k, got, want)
				}
			}
			var history []kafkaretry.Failure
			if err := json.Unmarshal([]byte(header(d, kafkaretry.HeaderHistory)), &history); err != nil {
				t.Fatalf("DLQ %s: %v", kafkaretry.HeaderHistory, err)
			}
			if got := len(history); got != tt.wantCalls {
				t.Fatalf("history has %d failures, want %d", got, tt.wantCalls)
			}
			for i, f := range history {
				if f.Attempt != i+1 || f.Message == "" || f.Type == "" {
					t.Errorf("history[%d] = %+v, want attempt %d with a type and message", i, f, i+1)
				}
			}
			if got := len(e.records(t, kafkaretry.RetryTopic(topic, 0))); got != tt.wantCalls-1 {
				t.Errorf("retry topic has %d records, want %d", got, tt.wantCalls-1)
			}
			if got := metric(t, reg, "kafkaretry_records_dead_lettered_total", "reason", tt.wantReason); got != 1 {
				t.Errorf("dead_lettered_total{reason=%q} = %v, want 1", tt.wantReason, got)
			}
			if got := metric(t, reg, "kafkaretry_records_retried_total"); got != tt.wantRetried {
				t.Errorf("retried_total = %v, want %v", got, tt.wantRetried)
			}
		})
	}
}

// TestDeadLetterRouting sends declined cards to a dead-letter topic of
// their own, chosen from the final error as Spring's DLT resolver would,
// and the rest to the default one; the error's Code() is its type in
// x-last-error-type.
func TestDeadLetterRouting(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	declinedTopic := topic + "-declined"
	e.run(t, kafkaretry.Config{
		Policy:           retry.Policy{MaxAttempts: 1},
		DeadLetterTopics: []string{declinedTopic},
		DeadLetterTopic: func(err error) string {
			if errors.As(err, new(declined)) {
				return declinedTopic
			}
			return "" // the default
		},
		Handler: func(_ context.Context, r *kgo.Record) error {
			if string(r.Key) == "card" {
				return fmt.Errorf("charging: %w", declined{})
			}
			return errFlaky
		},
	})
	e.produce(t, rec("card", 0), rec("other", 0))
	waitFor(t, "both dead-lettered", func() bool {
		return len(e.records(t, declinedTopic)) == 1 && len(e.records(t, kafkaretry.DLQTopic(topic))) == 1
	})
	d := e.records(t, declinedTopic)[0]
	if string(d.Key) != "card" || header(d, kafkaretry.HeaderLastErrorType) != "com.acme.CardDeclinedException" {
		t.Errorf("%s holds %s with x-last-error-type %q, want card with the error's Code()", declinedTopic, d.Key, header(d, kafkaretry.HeaderLastErrorType))
	}
	o := e.records(t, kafkaretry.DLQTopic(topic))[0]
	if string(o.Key) != "other" || header(o, kafkaretry.HeaderLastErrorType) != "*errors.errorString" {
		t.Errorf("the DLQ holds %s with x-last-error-type %q, want other with its Go type", o.Key, header(o, kafkaretry.HeaderLastErrorType))
	}
}
