package kafkaretry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, *kgo.Record) error { return nil }
	tests := []struct {
		name string
		cfg  kafkaretry.Config
		want []string // in the error
	}{
		{name: "empty", cfg: kafkaretry.Config{}, want: []string{"topic is required", "group is required", "handler is required"}},
		{name: "bad policy", cfg: kafkaretry.Config{Topic: "t", Group: "g", Handler: ok, Policy: retry.Policy{MaxAttempts: -1}}, want: []string{"maxAttempts"}},
		{name: "bad tier", cfg: kafkaretry.Config{Topic: "t", Group: "g", Handler: ok, Tiers: []time.Duration{time.Second, 0}}, want: []string{"tiers[1]"}},
		{name: "negative hold", cfg: kafkaretry.Config{Topic: "t", Group: "g", Handler: ok, MaxHold: -time.Second}, want: []string{"must not be negative"}},
		{name: "negative session timeout", cfg: kafkaretry.Config{Topic: "t", Group: "g", Handler: ok, SessionTimeout: -time.Second}, want: []string{"session timeout"}},
		{name: "bad modes", cfg: kafkaretry.Config{Topic: "t", Group: "g", Handler: ok, Transactions: 7, Naming: 9}, want: []string{"transactions 7", "naming 9"}},
		{name: "one suffix", cfg: kafkaretry.Config{Topic: "t", Group: "g", Handler: ok, RetrySuffix: "-x", DLQSuffix: "-x"}, want: []string{`both "t-x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := kafkaretry.New(tt.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestMetricsShareARegisterer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	ok := func(context.Context, *kgo.Record) error { return nil }
	for _, cfg := range []kafkaretry.Config{
		{Topic: "a", Group: "g", Handler: ok, Registerer: reg},
		{Topic: "b", Group: "g", Handler: ok, Registerer: reg},
		{Topic: "a", Group: "g", Handler: ok, Registerer: reg}, // a restart in the same process
	} {
		if _, err := kafkaretry.New(cfg); err != nil {
			t.Errorf("New(topic %s): %v", cfg.Topic, err)
		}
	}
}

func TestTopicsCreated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		seedPartitions int32 // 0: no main topic
		cfg            kafkaretry.Config
		want           map[string]int // topic → partitions
		wantErr        string
	}{
		{name: "like the main topic", seedPartitions: 3, cfg: kafkaretry.Config{Tiers: []time.Duration{time.Second, time.Minute}},
			want: map[string]int{"orders-retry-1": 3, "orders-retry-2": 3, "orders-dlq": 3}},
		{name: "configured count", seedPartitions: 3, cfg: kafkaretry.Config{Partitions: 2},
			want: map[string]int{"orders-retry": 2, "orders-dlq": 2}},
		{name: "main topic missing, count given", cfg: kafkaretry.Config{Partitions: 2},
			want: map[string]int{"orders": 2, "orders-retry": 2, "orders-dlq": 2}},
		{name: "main topic missing", wantErr: "orders does not exist"},
		{name: "Spring naming", seedPartitions: 2, cfg: kafkaretry.Config{Naming: kafkaretry.NamingSpring, Tiers: []time.Duration{time.Second, time.Minute}},
			want: map[string]int{"orders-retry-0": 2, "orders-retry-1": 2, "orders-dlt": 2}},
		{name: "suffixes and routed DLQs", seedPartitions: 1, cfg: kafkaretry.Config{RetrySuffix: ".retry", DLQSuffix: ".dead", DeadLetterTopics: []string{"orders.invalid"}},
			want: map[string]int{"orders.retry": 1, "orders.dead": 1, "orders.invalid": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, max(tt.seedPartitions, 1))
			if tt.seedPartitions == 0 {
				if _, err := kadm.NewClient(e.client(t)).DeleteTopic(t.Context(), topic); err != nil {
					t.Fatal(err)
				}
			}
			cfg := tt.cfg
			cfg.Topic, cfg.Group, cfg.Handler = topic, group, func(context.Context, *kgo.Record) error { return nil }
			cfg.ClientOpts, cfg.Logger = e.opts, slogT(t)
			p, err := kafkaretry.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			err = p.Run(ctx) // returns at the deadline once the topics are there
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Run: %v, want an error about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			details, err := kadm.NewClient(e.client(t)).ListTopics(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.want {
				if got := len(details[name].Partitions); got != want {
					t.Errorf("%s has %d partitions, want %d", name, got, want)
				}
			}
		})
	}
}

// TestTransactionsByDefault checks that the default, TxnAuto, forwards
// within transactions on brokers that support them (kfake does): the retry
// topic holds a commit marker after the copy, which TxnOff does not write.
func TestTransactionsByDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		txn  kafkaretry.TxnMode
		end  int64 // the retry topic's end offset after one copy
	}{
		{"auto", kafkaretry.TxnAuto, 2},
		{"off", kafkaretry.TxnOff, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, 1)
			e.run(t, kafkaretry.Config{Transactions: tt.txn, Policy: retry.Policy{MaxAttempts: 2, Backoff: backoff.Policy{Base: time.Hour}},
				Handler: func(context.Context, *kgo.Record) error { return errFlaky }})
			e.produce(t, rec("a", 0))
			retryTopic := kafkaretry.RetryTopic(topic, 0)
			waitFor(t, "the copy", func() bool { return len(e.records(t, retryTopic)) == 1 })
			ends, err := kadm.NewClient(e.client(t)).ListEndOffsets(t.Context(), retryTopic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := ends.Lookup(retryTopic, 0); o.Offset != tt.end {
				t.Errorf("end offset %d, want %d", o.Offset, tt.end)
			}
		})
	}
}

func TestTopicNames(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, *kgo.Record) error { return nil }
	tiers := []time.Duration{time.Second, time.Minute}
	tests := []struct {
		name      string
		cfg       kafkaretry.Config
		wantRetry []string
		wantDLQ   string
	}{
		{"default", kafkaretry.Config{}, []string{"orders-retry"}, "orders-dlq"},
		{"default tiers", kafkaretry.Config{Tiers: tiers}, []string{"orders-retry-1", "orders-retry-2"}, "orders-dlq"},
		{"Spring", kafkaretry.Config{Naming: kafkaretry.NamingSpring}, []string{"orders-retry"}, "orders-dlt"},
		{"Spring tiers", kafkaretry.Config{Naming: kafkaretry.NamingSpring, Tiers: tiers}, []string{"orders-retry-0", "orders-retry-1"}, "orders-dlt"},
		{"suffixes", kafkaretry.Config{RetrySuffix: ".RETRY", DLQSuffix: ".DLT", Tiers: tiers}, []string{"orders.RETRY-1", "orders.RETRY-2"}, "orders.DLT"},
	}
	for _, tt := range tests {
		cfg := tt.cfg
		cfg.Topic, cfg.Group, cfg.Handler = topic, group, ok
		p, err := kafkaretry.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		retryTopics, dlq := p.Topics()
		if strings.Join(retryTopics, ",") != strings.Join(tt.wantRetry, ",") || dlq != tt.wantDLQ {
			t.Errorf("%s: %v and %s, want %v and %s", tt.name, retryTopics, dlq, tt.wantRetry, tt.wantDLQ)
		}
	}
}
