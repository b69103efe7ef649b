package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
)

// Processor consumes a main topic and its retry topics, calls the Handler
// for each record and moves failed records to a retry topic or the DLQ. Build
// it with New and start it with Run; see the package doc for the semantics.
type Processor struct {
	cfg         Config
	policy      retry.Policy // Config.Policy, with the tiers as its Backoff when there are tiers
	retryTopics []string
	dlq         string
	clock       retry.Clock
	produce     retry.Policy
	log         *slog.Logger
	m           *metrics
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
		retryTopics: retryTopics(cfg.Topic, len(cfg.Tiers)),
		dlq:         DLQTopic(cfg.Topic),
		clock:       cfg.Policy.Clock,
		produce:     cfg.ProducePolicy,
		log:         cfg.Logger,
	}
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
	if p.cfg.MaxHold == 0 {
		p.cfg.MaxHold = DefaultMaxHold
	}
	if p.cfg.MaxPollRecords == 0 {
		p.cfg.MaxPollRecords = DefaultMaxPollRecords
	}
	m, err := newMetrics(cfg.Topic, p.retryTopics, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	p.m = m
	return p, nil
}

// Run creates the missing topics, then consumes the main topic and the retry
// topics until ctx ends, and returns nil then; it returns an error when
// topics cannot be checked or created or a client cannot be made. Records
// held or half-handled when ctx ends are left uncommitted, to be handled by
// the next Run. Run may be called again after it returns, not concurrently.
func (p *Processor) Run(ctx context.Context) error {
	if err := p.ensureTopics(ctx); err != nil {
		return err
	}
	main, err := newLoop(p, false)
	if err != nil {
		return err
	}
	defer main.cl.Close()
	retryLoop, err := newLoop(p, true)
	if err != nil {
		return err
	}
	defer retryLoop.cl.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- main.run(ctx) }()
	go func() { errc <- retryLoop.run(ctx) }()
	err = <-errc
	cancel() // one consumer stopping stops the other
	return errors.Join(err, <-errc)
}

// ensureTopics creates the retry and DLQ topics that are missing, and the
// main topic when it is missing and Config.Partitions says how big.
func (p *Processor) ensureTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(p.cfg.ClientOpts...)
	if err != nil {
		return fmt.Errorf("kafkaretry: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	all := append([]string{p.cfg.Topic, p.dlq}, p.retryTopics...)
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
