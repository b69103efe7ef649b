package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Handler handles one record. Returning nil marks it done; an error sends it
// to a retry topic or the DLQ as the Policy decides. A Handler is called from
// one goroutine per consumer (main and retry), so two calls may run at once;
// it should return soon after ctx ends, and an error it returns once ctx has
// ended leaves the record uncommitted, to be handled again.
type Handler func(ctx context.Context, r *kgo.Record) error

// Config configures a Processor. Topic, Group and Handler are required; the
// zero value of every other field means its default.
type Config struct {
	Topic   string  // the main topic T
	Group   string  // the main consumer group; the retry consumer's is Group+"-retry"
	Handler Handler // required

	// Policy says which errors are retried, how many attempts in all
	// (MaxAttempts, the first on T included), the delays, and optionally a
	// Budget counted from x-first-attempt-timestamp and a shared Quota; the
	// decision after a failure is retry.Policy.Decide, as for retry.Do.
	// Policy.Clock (nil: the real clock) is the time every due time is
	// computed and awaited with; Policy.Rand supplies the jitter;
	// Policy.AttemptTimeout, when set, bounds each Handler call, and a call
	// it cuts short is retried. Policy.Observer hears every handled
	// record's attempt: Succeeded, Retrying once its copy is in a retry
	// topic, GaveUp (Reason saying why) once it is in the DLQ.
	// Policy.Logger, when set, logs the same events as retry.Log does, with
	// the record's topic, partition and offset and where it went.
	Policy retry.Policy
	// Tiers, when set, are the fixed delays of the tier topics T-retry-1 …
	// T-retry-N (see the package doc); each must be positive. Without them
	// the delays come from Policy.Backoff and there is one topic, T-retry.
	Tiers []time.Duration

	// Partitions is the partition count of retry and DLQ topics created by
	// Run; 0 means the main topic's. When the main topic does not exist and
	// Partitions is set, it is created too.
	Partitions int32
	// ReplicationFactor of created topics; 0 means the broker's default.
	ReplicationFactor int16
	// MaxHold is the longest a retry record is held: a later x-process-after
	// is treated as now+MaxHold. 0 means DefaultMaxHold.
	MaxHold time.Duration
	// MaxPollRecords caps the records handled between two commits; 0 means
	// DefaultMaxPollRecords. A rebalance waits until the records of one poll
	// are handled, so keep MaxPollRecords times a handler's duration well
	// under the group's rebalance timeout (kgo.RebalanceTimeout, 60s by
	// default).
	MaxPollRecords int
	// ProducePolicy paces the retries of a forward (to a retry topic or the
	// DLQ) that Kafka refused. With neither Backoff nor MaxAttempts set it
	// means DefaultProducePolicy; its nil Clock means Policy.Clock. If it
	// gives up, Run returns the error, leaving the record uncommitted.
	ProducePolicy retry.Policy

	// ClientOpts are given to every franz-go client the Processor makes:
	// seed brokers, TLS, SASL, … They must not choose topics, a group or
	// commit behaviour: the Processor sets those.
	ClientOpts []kgo.Opt
	// Registerer receives the Processor's metrics; nil means they are kept
	// but not registered.
	Registerer prometheus.Registerer
	// Logger logs bad headers (Warn) and Kafka trouble and, unless
	// Policy.Logger logs them already, dead letters (Warn) and retries
	// (Debug); nil means Policy.Logger, then slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxHold        = 24 * time.Hour
	DefaultMaxPollRecords = 100
)

// DefaultProducePolicy returns the pacing of refused forwards: exponential
// from 100ms to 10s with full jitter, with no cap on attempts, so that a
// record is never committed without its forward and only Run's context
// stops the retries.
func DefaultProducePolicy() retry.Policy {
	return retry.Policy{
		Name:        "kafkaretry forward",
		MaxAttempts: math.MaxInt,
		Backoff:     backoff.Policy{Kind: backoff.Exponential, Base: 100 * time.Millisecond, Max: 10 * time.Second},
	}
}

// RetryTopic returns the name of topic's retry topic: T-retry for tier 0,
// T-retry-k for tier k ≥ 1.
func RetryTopic(topic string, tier int) string {
	if tier <= 0 {
		return topic + "-retry"
	}
	return topic + "-retry-" + strconv.Itoa(tier)
}

// DLQTopic returns the name of topic's dead-letter topic, T-dlq.
func DLQTopic(topic string) string { return topic + "-dlq" }

// retryTopics lists the retry topics for tiers tiers (0: no tiers).
func retryTopics(topic string, tiers int) []string {
	if tiers == 0 {
		return []string{RetryTopic(topic, 0)}
	}
	ts := make([]string, tiers)
	for i := range ts {
		ts[i] = RetryTopic(topic, i+1)
	}
	return ts
}

// tierTopic returns the retry topic, among topics as retryTopics lists
// them, of a record whose attempt n failed: tier n, or the last tier.
func tierTopic(topics []string, n int) string {
	return topics[max(min(n, len(topics)), 1)-1]
}

func (c *Config) validate() error {
	var errs []error
	if c.Topic == "" {
		errs = append(errs, errors.New("topic is required"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("group is required"))
	}
	if c.Handler == nil {
		errs = append(errs, errors.New("handler is required"))
	}
	if err := c.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("policy: %w", err))
	}
	for i, d := range c.Tiers {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("tiers[%d] = %v: must be positive", i, d))
		}
	}
	if c.Partitions < 0 || c.ReplicationFactor < 0 || c.MaxHold < 0 || c.MaxPollRecords < 0 {
		errs = append(errs, errors.New("partitions, replication factor, max hold and max poll records must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafkaretry: %w", err)
	}
	return nil
}

// tierBackoff expresses fixed tier delays as a backoff policy of the core
// engine: retry n waits tiers[min(n, N)−1], without jitter.
func tierBackoff(tiers []time.Duration) backoff.Policy {
	tiers = append([]time.Duration(nil), tiers...)
	return backoff.Policy{
		Kind:   backoff.Custom,
		Max:    backoff.None, // the tiers are the delays, however long
		Jitter: backoff.NoJitter,
		Func:   func(n int) time.Duration { return tiers[min(n, len(tiers))-1] },
	}
}

// realClock is the wall clock, for a Policy without a Clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
