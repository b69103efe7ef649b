package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry/cmd/retryctl/internal/cli"
	"github.com/retrykit/retry/kafkaretry"
)

// TestKafkaReplay runs "retryctl kafka replay" against a kfake broker whose
// dead-letter topic holds two records.
func TestKafkaReplay(t *testing.T) {
	t.Parallel()
	const topic = "orders"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic, kafkaretry.RetryTopic(topic, 1), kafkaretry.DLQTopic(topic), topic+"-dlt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, key := range []string{"a", "b"} {
		r := &kgo.Record{Topic: kafkaretry.DLQTopic(topic), Key: []byte(key),
			Headers: []kgo.RecordHeader{{Key: kafkaretry.HeaderLastErrorType, Value: []byte("boom")}}}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Spring Kafka's dead-letter topic holds two copies of one failure.
	for range 2 {
		r := &kgo.Record{Topic: topic + "-dlt", Key: []byte("c"), Headers: []kgo.RecordHeader{
			{Key: "kafka_dlt-original-topic", Value: []byte(topic)},
			{Key: "kafka_dlt-original-partition", Value: []byte{0, 0, 0, 0}},
			{Key: "kafka_dlt-original-offset", Value: []byte{0, 0, 0, 0, 0, 0, 0, 3}},
		}}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	brokers := strings.Join(c.ListenAddrs(), ",")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // what it prints, exactly
		stderr string // a part of what it complains
	}{
		{"dry run", []string{"-brokers", brokers, "-topic", topic, "-dry-run", "-since", "1h"}, cli.ExitOK,
			"would replay 2 of 2 records from orders-dlq to orders\n", ""},
		{"type filter", []string{"-brokers", brokers, "-topic", topic, "-to", "retry", "-tiers", "2", "-error-type", "nope", "-until", time.Now().Add(time.Hour).Format(time.RFC3339)}, cli.ExitOK,
			"replayed 0 of 2 records from orders-dlq to orders-retry-1\n", ""},
		{"--json", []string{"-brokers", brokers, "-topic", topic, "-dry-run", "--json"}, cli.ExitOK,
			"{\n  \"dryRun\": true,\n  \"scanned\": 2,\n  \"replayed\": 2,\n  \"duplicates\": 0,\n  \"from\": \"orders-dlq\",\n  \"to\": \"orders\"\n}\n", ""},
		{"spring naming, copies once", []string{"-brokers", brokers, "-topic", topic, "-naming", "spring", "-dry-run"}, cli.ExitOK,
			"would replay 1 of 2 records from orders-dlt to orders (1 duplicate copies skipped)\n", ""},
		{"bad naming", []string{"-topic", topic, "-naming", "kotlin"}, cli.ExitError, "", "want default or spring"},
		{"no topic", []string{"-brokers", brokers}, cli.ExitError, "", "-topic is required"},
		{"bad target", []string{"-topic", topic, "-to", "dlq"}, cli.ExitError, "", "want main or retry"},
		{"bad time", []string{"-topic", topic, "-since", "yesterday"}, cli.ExitError, "", "-since"},
		{"stray argument", []string{"-topic", topic, "now"}, cli.ExitUsage, "", "unexpected argument"},
		{"unknown flag", []string{"-topic", topic, "-colour"}, cli.ExitUsage, "", "--topic T"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			env := cli.Env{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
			code := cli.Run(context.Background(), append([]string{"kafka", "replay"}, tt.args...), env)
			if code != tt.code || tt.stdout != "" && out.String() != tt.stdout || !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out.String(), errOut.String(), tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}
