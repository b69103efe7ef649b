package kafkaretry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
)

// Processor consumes a main topic and its retry topics, calls the Handler
// for each record and moves failed records to a retry topic or the DLQ. Build
// it with New and start it with Run; see the package doc for the semantics.
type Processor struct {
	cfg         Config
	policy      retry.Policy // Config.Policy, with the tiers as its Backoff when there are tiers
	retryTopics []string
	retryGroups []retryGroup
	dlq         string // the default dead-letter topic
	spring      bool   // NamingSpring: write Spring's headers too
	clock       retry.Clock
	produce     retry.Policy
	log         *slog.Logger
	m           *metrics
	propagator  propagation.TextMapPropagator
	tracer      trace.Tracer
}

// New checks cfg and returns a Processor, or an error listing every problem
// with cfg, or the Registerer's refusal of the metrics.
func New(cfg Config) (*Processor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Processor{
		cfg:         cfg,
		policy:      cfg.Policy,
		retryTopics: cfg.names().retryTopics(cfg.Topic, len(cfg.Tiers)),
		dlq:         cfg.names().dlqTopic(cfg.Topic),
		spring:      cfg.Naming == NamingSpring,
		clock:       cfg.Policy.Clock,
		produce:     cfg.ProducePolicy,
		log:         cfg.Logger,
	}
	p.retryGroups = retryGroupsOf(&cfg, p.retryTopics)
	if len(cfg.Tiers) > 0 {
		p.policy.Backoff = tierBackoff(cfg.Tiers)
	}
	if p.clock == nil {
		p.clock = realClock{}
	}
	if p.produce.Backoff.IsZero() && p.produce.MaxAttempts == 0 {
		p.produce = DefaultProducePolicy()
	}
	if p.produce.Clock == nil {
		p.produce.Clock = p.clock
	}
	if p.log == nil {
		p.log = cfg.Policy.Logger
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.propagator = cfg.Propagator; p.propagator == nil {
		p.propagator = DefaultPropagator()
	}
	p.tracer = newTracer(cfg.TracerProvider)
	if p.cfg.MaxHold == 0 {
		p.cfg.MaxHold = DefaultMaxHold
	}
	if p.cfg.MaxPollRecords == 0 {
		p.cfg.MaxPollRecords = DefaultMaxPollRecords
	}
	if p.cfg.CommitInterval == 0 {
		p.cfg.CommitInterval = DefaultCommitInterval
	}
	m, err := newMetrics(cfg.Topic, p.retryTopics, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	p.m = m
	return p, nil
}

// Topics returns the names of the retry topics (in tier order) and of the
// default dead-letter topic, as Config's naming makes them.
func (p *Processor) Topics() (retry []string, deadLetter string) {
	return slices.Clone(p.retryTopics), p.dlq
}

// Run creates the missing topics, then consumes the main topic and the retry
// topics until ctx ends, and returns nil then; it returns an error when
// topics cannot be checked or created or a client cannot be made. Records
// held or half-handled when ctx ends are left uncommitted, to be handled by
// the next Run. Run may be called again after it returns, not concurrently.
func (p *Processor) Run(ctx context.Context) error {
	txn, err := p.ensureTopics(ctx)
	if err != nil {
		return err
	}
	txnID := p.cfg.TransactionalID
	if txn && txnID == "" {
		txnID = p.cfg.Group + "-" + randomSuffix()
	}
	loops := make([]*loop, 0, 1+len(p.retryGroups))
	defer func() {
		for _, l := range loops {
			l.close()
		}
	}()
	for _, g := range append([]retryGroup{{p.cfg.Group, []string{p.cfg.Topic}}}, p.retryGroups...) {
		l, err := newLoop(p, g.group, g.topics, txn, txnID)
		if err != nil {
			return err
		}
		loops = append(loops, l)
	}
	p.log.Debug("kafkaretry: consuming", "topic", p.cfg.Topic, "retry_topics", p.retryTopics, "transactions", txn)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(loops))
	for _, l := range loops {
		go func() { errc <- l.run(ctx) }()
	}
	errs := []error{<-errc}
	cancel() // one consumer stopping stops the others
	for range len(loops) - 1 {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// retryGroup is a consumer group of retry topics.
type retryGroup struct {
	group  string
	topics []string
}

// retryGroupsOf returns the retry consumers' groups: one, Group+"-retry",
// for every retry topic; with NamingSpring one per retry topic, named as
// Spring Kafka names its retry listeners' groups, the main group plus the
// topic's suffix (Group+"-retry-0", …), so that a Spring consumer and a
// Processor share the committed offsets and take turns, not both handle
// each record.
func retryGroupsOf(cfg *Config, retryTopics []string) []retryGroup {
	if cfg.Naming != NamingSpring {
		return []retryGroup{{cfg.Group + "-retry", retryTopics}}
	}
	gs := make([]retryGroup, len(retryTopics))
	for i, t := range retryTopics {
		gs[i] = retryGroup{cfg.Group + strings.TrimPrefix(t, cfg.Topic), []string{t}}
	}
	return gs
}

// groupOf returns the consumer group that consumes topic.
func (p *Processor) groupOf(topic string) string {
	for _, g := range p.retryGroups {
		if slices.Contains(g.topics, topic) {
			return g.group
		}
	}
	return p.cfg.Group
}

// randomSuffix returns 8 random hex digits, to make a transactional ID of
// this Run's own.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// ErrNoTransactions is returned by Run when Config.Transactions is TxnOn and
// a broker does not support KIP-447 transactions.
var ErrNoTransactions = errors.New("kafkaretry: the brokers do not support transactions (KIP-447, Kafka 2.5+)")

// transactional reports whether the Processor should use transactions: as
// Config.Transactions says, and with TxnAuto when every broker supports
// KIP-447's TxnOffsetCommit (version 3) and EndTxn.
func (p *Processor) transactional(ctx context.Context, adm *kadm.Client) (bool, error) {
	if p.cfg.Transactions == TxnOff {
		return false, nil
	}
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return false, fmt.Errorf("kafkaretry: asking the brokers' API versions: %w", err)
	}
	ok := len(vs) > 0
	vs.Each(func(v kadm.BrokerApiVersions) {
		commit, okc := v.KeyMaxVersion(int16(kmsg.TxnOffsetCommit))
		_, oke := v.KeyMaxVersion(int16(kmsg.EndTxn))
		ok = ok && v.Err == nil && okc && oke && commit >= 3
	})
	if !ok && p.cfg.Transactions == TxnOn {
		return false, ErrNoTransactions
	}
	return ok, nil
}

// ensureTopics creates the retry and DLQ topics that are missing, and the
// main topic when it is missing and Config.Partitions says how big, and
// reports whether to use transactions.
func (p *Processor) ensureTopics(ctx context.Context) (txn bool, err error) {
	cl, err := kgo.NewClient(p.cfg.ClientOpts...)
	if err != nil {
		return false, fmt.Errorf("kafkaretry: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if txn, err = p.transactional(ctx, adm); err != nil {
		return false, err
	}
	all := append([]string{p.cfg.Topic, p.dlq}, p.retryTopics...)
	for _, t := range p.cfg.DeadLetterTopics {
		if !slices.Contains(all, t) {
			all = append(all, t)
		}
	}
	return txn, p.createTopics(ctx, adm, all)
}

// createTopics creates those of all that are missing.
func (p *Processor) createTopics(ctx context.Context, adm *kadm.Client, all []string) error {
	details, err := adm.ListTopics(ctx, all...)
	if err != nil {
		return fmt.Errorf("kafkaretry: listing topics: %w", err)
	}
	partitions := p.cfg.Partitions
	var missing []string
	for _, t := range all {
		d, ok := details[t]
		switch {
		case ok && d.Err == nil:
			if t == p.cfg.Topic && partitions == 0 {
				partitions = int32(len(d.Partitions))
			}
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		default:
			return fmt.Errorf("kafkaretry: topic %s: %w", t, d.Err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if partitions == 0 {
		return fmt.Errorf("kafkaretry: topic %s does not exist; create it or set Config.Partitions", p.cfg.Topic)
	}
	rf := p.cfg.ReplicationFactor
	if rf == 0 {
		rf = -1 // the broker's default
	}
	resps, err := adm.CreateTopics(ctx, partitions, rf, nil, missing...)
	if err != nil {
		return fmt.Errorf("kafkaretry: creating topics: %w", err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafkaretry: creating topic %s: %w", r.Topic, r.Err)
		}
		p.log.Info("kafkaretry: created topic", "topic", r.Topic, "partitions", partitions)
	}
	return nil
}
