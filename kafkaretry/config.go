package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

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
	Group   string  // the main consumer group; the retry consumer's is Group+"-retry" (NamingSpring: one per retry topic, Group+"-retry-0", …)
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
	// Propagator reads the trace context a record carries in its headers
	// into the ctx of the Handler and of Policy.Observer (see "Tracing" in
	// the package doc); nil means DefaultPropagator, W3C Trace Context and
	// Baggage. Give otel.GetTextMapPropagator() to use the application's
	// global one instead.
	Propagator propagation.TextMapPropagator
	// TracerProvider starts the span of each handling (SpanName); nil means
	// the global one, otel.GetTracerProvider(), which records nothing until
	// the application sets one.
	TracerProvider trace.TracerProvider

	// Transactions says whether a forward and the commit of its source's
	// offset are one Kafka transaction (see "Delivery" in the package doc):
	// TxnAuto, the default, uses one when every broker supports KIP-447
	// (Kafka 2.5+), TxnOn requires it, TxnOff never uses one.
	Transactions TxnMode
	// TransactionalID prefixes the transactional IDs of the two consumers
	// (ID+"-main", ID+"-retry"). Give each instance its own stable ID (the
	// pod's or host's name): a restarted instance then fences its
	// predecessor and aborts the transaction it left open at once. "" means
	// Group plus a random suffix per Run, and a transaction left open by a
	// killed consumer holds its partitions until TransactionTimeout ends it.
	TransactionalID string
	// TransactionTimeout is how long the brokers let a transaction stay
	// open before aborting it (kgo.TransactionTimeout); 0 means franz-go's
	// 40s. It must exceed the time to handle MaxPollRecords records.
	TransactionTimeout time.Duration
	// CommitInterval, without transactions, is the longest a handled
	// record waits for its offset to be committed; a forwarded record's
	// offset is committed at once. 0 means DefaultCommitInterval.
	CommitInterval time.Duration

	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// consumer groups' (kgo.SessionTimeout, …); 0 means franz-go's: 45s,
	// 3s and 60s. The session timeout is how long a consumer that died
	// without leaving the group (kill -9, a lost host) keeps its partitions
	// before the group gives them to another; see "Takeover" in the package
	// doc. The broker bounds it (group.min.session.timeout.ms, 6s by
	// default).
	SessionTimeout, HeartbeatInterval, RebalanceTimeout time.Duration

	// Naming chooses the topic names and headers: NamingDefault, or
	// NamingSpring to share retry topics with Spring Kafka consumers (see
	// "Sharing topics with Spring Kafka" in the package doc).
	Naming Naming
	// RetrySuffix and DLQSuffix name the retry and dead-letter topics:
	// T+RetrySuffix (with tiers T+RetrySuffix+"-k") and T+DLQSuffix. ""
	// means "-retry" and "-dlq", or "-retry" and "-dlt" with NamingSpring.
	RetrySuffix, DLQSuffix string
	// DeadLetterTopic, when set, chooses the dead-letter topic of a record
	// from its final error, as Spring's DLT resolver does; "" means the
	// default T+DLQSuffix. The topics it may return and that Run should
	// create go in DeadLetterTopics.
	DeadLetterTopic func(err error) string
	// DeadLetterTopics are the topics, besides the default dead-letter
	// topic, that DeadLetterTopic may return; Run creates those missing.
	DeadLetterTopics []string

	// Logger logs bad headers (Warn) and Kafka trouble and, unless
	// Policy.Logger logs them already, dead letters (Warn) and retries
	// (Debug); nil means Policy.Logger, then slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxHold        = 24 * time.Hour
	DefaultMaxPollRecords = 100
	DefaultCommitInterval = 100 * time.Millisecond
)

// TxnMode says whether forwards are transactional; see Config.Transactions.
type TxnMode int

// The transaction modes. The zero value is TxnAuto.
const (
	// TxnAuto uses transactions when every broker supports KIP-447.
	TxnAuto TxnMode = iota
	// TxnOn always uses transactions: Run fails on brokers without them.
	TxnOn
	// TxnOff never uses transactions.
	TxnOff
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

// RetryTopic returns the name of topic's retry topic with the default
// naming: T-retry for tier 0, T-retry-k for tier k ≥ 1.
func RetryTopic(topic string, tier int) string {
	return names{}.retryTopic(topic, tier)
}

// DLQTopic returns the name of topic's dead-letter topic with the default
// naming, T-dlq.
func DLQTopic(topic string) string { return names{}.dlqTopic(topic) }

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
	if c.TransactionTimeout < 0 || c.CommitInterval < 0 || c.SessionTimeout < 0 || c.HeartbeatInterval < 0 || c.RebalanceTimeout < 0 {
		errs = append(errs, errors.New("transaction timeout, commit interval, session timeout, heartbeat interval and rebalance timeout must not be negative"))
	}
	if c.Transactions < TxnAuto || c.Transactions > TxnOff {
		errs = append(errs, fmt.Errorf("transactions %d: want TxnAuto, TxnOn or TxnOff", c.Transactions))
	}
	if c.Naming < NamingDefault || c.Naming > NamingSpring {
		errs = append(errs, fmt.Errorf("naming %d: want NamingDefault or NamingSpring", c.Naming))
	}
	if n := c.names(); n.retryTopic(c.Topic, 0) == n.dlqTopic(c.Topic) {
		errs = append(errs, fmt.Errorf("retry and dead-letter topics are both %q", n.dlqTopic(c.Topic)))
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
