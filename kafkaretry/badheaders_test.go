package kafkaretry_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

// TestBadHeaders feeds the retry consumer records whose headers are
// missing or malformed: each is handled by the documented rule, ends in the
// DLQ after the number of attempts the rule implies, and the decision is
// logged.
func TestBadHeaders(t *testing.T) {
	t.Parallel()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i+1 < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	const (
		attempt = kafkaretry.HeaderRetryAttempt
		after   = kafkaretry.HeaderProcessAfter
	)
	tests := []struct {
		name      string
		headers   []kgo.RecordHeader
		wantCalls int    // with MaxAttempts 3: 2 when counted as attempt 1 made, 1 when as 2
		wantLog   string // what the log says about it
	}{
		{name: "no headers at all", headers: nil, wantCalls: 2, wantLog: "header x-retry-attempt missing"},
		{name: "attempt missing", headers: h(after, now), wantCalls: 2, wantLog: "header x-retry-attempt missing"},
		{name: "attempt not a number", headers: h(attempt, "two", after, now), wantCalls: 2, wantLog: `header x-retry-attempt \"two\"`},
		{name: "attempt negative", headers: h(attempt, "-4", after, now), wantCalls: 2, wantLog: `header x-retry-attempt \"-4\": below 0`},
		{name: "attempt huge", headers: h(attempt, "99999999999999999999999", after, now), wantCalls: 2, wantLog: `\"99999999999999999999999\": not a whole number`},
		{name: "attempt past the policy", headers: h(attempt, "1000", after, now), wantCalls: 1, wantLog: "x-retry-attempt 1000 is not below MaxAttempts"},
		{name: "attempt twice", headers: h(attempt, "1", attempt, "2", after, now), wantCalls: 1},
		{name: "due missing", headers: h(attempt, "1"), wantCalls: 2, wantLog: "header x-process-after missing"},
		{name: "due not a number", headers: h(attempt, "1", after, "soon"), wantCalls: 2, wantLog: `header x-process-after \"soon\"`},
		{name: "due negative", headers: h(attempt, "1", after, "-5"), wantCalls: 2, wantLog: `header x-process-after \"-5\": below 0`},
		{name: "due huge", headers: h(attempt, "1", after, "9223372036854775807"), wantCalls: 2, wantLog: "x-process-after is more than MaxHold ahead"},
		{name: "previous delay garbage", headers: h(attempt, "1", after, now, kafkaretry.HeaderPrevDelay, "1e99"), wantCalls: 2, wantLog: `header x-retry-prev-delay-ms \"1e99\"`},
		{name: "history garbage", headers: h(attempt, "1", after, now, kafkaretry.HeaderHistory, "[{"), wantCalls: 2, wantLog: "not a JSON list of failures"},
	}

	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(1, topic, kafkaretry.RetryTopic(topic, 0), kafkaretry.DLQTopic(topic)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{c: c, opts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}
	var rs []*kgo.Record
	for _, tt := range tests {
		r := rec(tt.name, 0, tt.headers...)
		r.Topic = kafkaretry.RetryTopic(topic, 0)
		rs = append(rs, r)
	}
	e.produce(t, rs...)

	j := newJournal()
	logs := &logBuffer{}
	e.run(t, kafkaretry.Config{
		Policy:  retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 5 * time.Millisecond, Jitter: backoff.NoJitter}},
		MaxHold: 200 * time.Millisecond,
		Handler: j.handler(func(call) error { return errFlaky }),
		Logger:  logs.logger(),
	})
	waitFor(t, "every record in the DLQ", func() bool { return len(e.records(t, kafkaretry.DLQTopic(topic))) == len(tests) })

	dlq := make(map[string]*kgo.Record)
	for _, r := range e.records(t, kafkaretry.DLQTopic(topic)) {
		dlq[string(r.Key)] = r
	}
	lines := strings.Split(logs.String(), "\n")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(j.of(tt.name)); got != tt.wantCalls {
				t.Errorf("handled %d times, want %d", got, tt.wantCalls)
			}
			if got := header(dlq[tt.name], kafkaretry.HeaderRetryAttempt); got != "3" {
				t.Errorf("DLQ %s = %q, want 3", kafkaretry.HeaderRetryAttempt, got)
			}
			// The records were produced in order to one partition: offset i.
			offset := "offset=" + strconv.Itoa(i) + " "
			if tt.wantLog != "" && !slices.ContainsFunc(lines, func(l string) bool {
				return strings.Contains(l, "bad retry headers") && strings.Contains(l, offset) && strings.Contains(l, tt.wantLog)
			}) {
				t.Errorf("no log line for %s says %q", offset, tt.wantLog)
			}
		})
	}
	if t.Failed() {
		t.Log(logs.String())
	}
}
