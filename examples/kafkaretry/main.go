// Command kafkaretry runs a consumer whose handler fails at random and prints
// each record as it moves from the main topic through the retry tiers to
// success or to the dead-letter topic.
//
// By default it starts an in-process Kafka (kfake) and needs nothing else:
//
//	go run ./examples/kafkaretry
//	go run ./examples/kafkaretry -records 40 -fail 0.6 -seed 7
//	go run ./examples/kafkaretry -brokers localhost:9092 -topic demo-orders
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/kafkaretry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaretry example:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "", "seed brokers, comma-separated; empty starts an in-process kfake cluster")
	topic := flag.String("topic", "orders", "main topic")
	records := flag.Int("records", 20, "records to produce")
	fail := flag.Float64("fail", 0.5, "chance that an attempt fails with a transient error")
	permanent := flag.Float64("permanent", 0.05, "chance that an attempt fails for good")
	seed := flag.Uint64("seed", 1, "seed of the failures")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	seeds := strings.Split(*brokers, ",")
	if *brokers == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, *topic))
		if err != nil {
			return err
		}
		defer c.Close()
		seeds = c.ListenAddrs()
		fmt.Println("started an in-process Kafka (kfake) at", seeds[0])
	}

	const maxAttempts = 4
	tiers := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}
	out := &printer{left: *records}
	host, _ := os.Hostname()
	p, err := kafkaretry.New(kafkaretry.Config{
		Topic:  *topic,
		Group:  *topic + "-example",
		Policy: retry.Policy{MaxAttempts: maxAttempts},
		Tiers:  tiers,
		// Takeover in seconds: a consumer killed without leaving the group
		// keeps its partitions for SessionTimeout (franz-go's default is
		// 45s; 6s is the brokers' default minimum), a transaction it left
		// open holds them until TransactionTimeout (40s by default), and a
		// restarted one with the same TransactionalID aborts that
		// transaction at once. Forwards are transactional (exactly once)
		// whenever the brokers support it, as kfake does.
		SessionTimeout:     6 * time.Second,
		HeartbeatInterval:  time.Second,
		RebalanceTimeout:   10 * time.Second,
		TransactionTimeout: 10 * time.Second,
		TransactionalID:    *topic + "-example-" + host,
		ClientOpts:         []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Handler: func(ctx context.Context, r *kgo.Record) error {
			attempt := 1
			if n, err := strconv.Atoi(header(r, kafkaretry.HeaderRetryAttempt)); err == nil {
				attempt = n + 1
			}
			roll := chance(*seed, string(r.Key), attempt)
			var err error
			switch {
			case roll < *permanent:
				err = retry.Permanent(errors.New("invalid order"))
			case roll < *permanent+*fail:
				err = errors.New("inventory service timed out")
			}
			out.handled(r, attempt, err)
			return err
		},
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "processor:", err)
			cancel()
		}
	})
	defer wg.Wait()

	// Read committed: with transactions, the copies of an aborted
	// transaction are in the topic but never count.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(kafkaretry.DLQTopic(*topic)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range *records {
		r := &kgo.Record{Topic: *topic, Key: fmt.Appendf(nil, "order-%02d", i), Value: []byte(`{"qty":1}`)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
	}
	fmt.Printf("produced %d records to %s; tiers %v, %d attempts at most\n\n", *records, *topic, tiers, maxAttempts)

	// The dead-letter topic is read like any other: here, to report arrivals.
	for !out.finished() && ctx.Err() == nil {
		// Short polls: the last record may end in success, not in the DLQ.
		pollCtx, cancelPoll := context.WithTimeout(ctx, 200*time.Millisecond)
		cl.PollFetches(pollCtx).EachRecord(out.deadLettered)
		cancelPoll()
	}
	cancel()
	out.summary()
	return nil
}

// chance is a number in [0, 1) fixed by the seed, the record and the
// attempt, so a run can be repeated whatever the goroutines' timing.
func chance(seed uint64, key string, attempt int) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", key, attempt)
	// FNV's high bits barely depend on the last bytes; PCG mixes them.
	return rand.New(rand.NewPCG(seed, h.Sum64())).Float64()
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// printer prints events from the handler's goroutines and the DLQ reader.
type printer struct {
	mu        sync.Mutex
	left      int
	succeeded int
	dead      int
}

func (p *printer) handled(r *kgo.Record, attempt int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	result := "ok"
	if err != nil {
		result = "failed: " + err.Error()
	} else {
		p.succeeded++
		p.left--
	}
	fmt.Printf("%s  attempt %d from %-16s %s\n", r.Key, attempt, r.Topic, result)
}

func (p *printer) deadLettered(r *kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead++
	p.left--
	fmt.Printf("%s  -> %s after %s attempt(s): %s (dedupe key %s)\n", r.Key, r.Topic,
		header(r, kafkaretry.HeaderRetryAttempt), header(r, kafkaretry.HeaderDLQReason), header(r, kafkaretry.HeaderRecordID))
}

func (p *printer) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.left <= 0
}

func (p *printer) summary() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Printf("\n%d succeeded, %d dead-lettered\n", p.succeeded, p.dead)
}
