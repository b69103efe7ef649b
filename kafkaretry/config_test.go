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
