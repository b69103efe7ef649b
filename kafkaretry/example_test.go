package kafkaretry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/kafkaretry"
)

// A payment fails once on the main topic, waits 100ms in payments-retry-1 and
// succeeds on its second attempt; a refund fails for good and goes straight
// to payments-dlq. The cluster is kfake, in process.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "payments"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := kgo.SeedBrokers(cluster.ListenAddrs()...)

	done := make(chan struct{}, 2)
	p, err := kafkaretry.New(kafkaretry.Config{
		Topic:      "payments",
		Group:      "ledger",
		Policy:     retry.Policy{MaxAttempts: 4},
		Tiers:      []time.Duration{100 * time.Millisecond, time.Second},
		ClientOpts: []kgo.Opt{brokers},
		Logger:     slog.New(slog.DiscardHandler),
		Handler: func(ctx context.Context, r *kgo.Record) error {
			fmt.Printf("%s from %s, attempts before: %q\n", r.Key, r.Topic, headerValue(r, kafkaretry.HeaderRetryAttempt))
			switch {
			case string(r.Key) == "refund-1":
				defer func() { done <- struct{}{} }()
				return retry.Permanent(errors.New("unknown account"))
			case r.Topic == "payments":
				return errors.New("ledger busy")
			}
			done <- struct{}{}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()

	producer, err := kgo.NewClient(brokers)
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "payments", Key: []byte("pay-1")}).FirstErr(); err != nil {
		panic(err)
	}
	<-done
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "payments", Key: []byte("refund-1")}).FirstErr(); err != nil {
		panic(err)
	}
	<-done
	cancel()
	if err := <-stopped; err != nil {
		panic(err)
	}
	// Output:
	// pay-1 from payments, attempts before: ""
	// pay-1 from payments-retry-1, attempts before: "1"
	// refund-1 from payments, attempts before: ""
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// State is what a retry record carries; ReadState reads it back, applying
// the documented rules to headers it cannot use.
func ExampleReadState() {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	st := kafkaretry.State{Attempt: 2, ProcessAfter: at.Add(30 * time.Second), FirstAttempt: at}
	r := &kgo.Record{Headers: st.Headers()}
	got, err := kafkaretry.ReadState(r)
	fmt.Println(got.Attempt, got.ProcessAfter.Sub(got.FirstAttempt), err)

	r.Headers = []kgo.RecordHeader{{Key: kafkaretry.HeaderRetryAttempt, Value: []byte("-1")}}
	got, err = kafkaretry.ReadState(r)
	fmt.Println(got.Attempt, got.ProcessAfter.IsZero())
	fmt.Println(err)
	// Output:
	// 2 30s <nil>
	// 1 true
	// header x-retry-attempt "-1": below 0; counting 1 attempt made
	// header x-process-after missing; due now
	// header x-first-attempt-timestamp missing; using the record's timestamp
}
