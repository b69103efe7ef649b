package kafkaretry

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrykit/retry"
)

// metrics are one Processor's collectors, labelled with its main topic so
// that processors of different topics can share a Registerer.
type metrics struct {
	retryTopics   []string
	retried       *prometheus.CounterVec
	deadLettered  *prometheus.CounterVec
	delayAccuracy prometheus.Histogram
	held          prometheus.Gauge
}

func newMetrics(topic string, retryTopics []string, reg prometheus.Registerer) (*metrics, error) {
	labels := prometheus.Labels{"topic": topic}
	m := &metrics{
		retryTopics: retryTopics,
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kafkaretry_records_retried_total",
			Help:        "Records sent to a retry topic, by retry topic.",
			ConstLabels: labels,
		}, []string{"retry_topic"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "kafkaretry_records_dead_lettered_total",
			Help:        "Records sent to the dead-letter topic, by reason.",
			ConstLabels: labels,
		}, []string{"reason"}),
		delayAccuracy: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "kafkaretry_delay_accuracy_seconds",
			Help:        "Time a retry record was handled minus its x-process-after.",
			ConstLabels: labels,
			Buckets:     prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "kafkaretry_held_records",
			Help:        "Retry records fetched and held in memory until they are due.",
			ConstLabels: labels,
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.retried, err = register(reg, m.retried)
	if err == nil {
		m.deadLettered, err = register(reg, m.deadLettered)
	}
	if err == nil {
		m.delayAccuracy, err = register(reg, m.delayAccuracy)
	}
	if err == nil {
		m.held, err = register(reg, m.held)
	}
	if err != nil {
		return nil, fmt.Errorf("kafkaretry: registering metrics: %w", err)
	}
	return m, nil
}

// Observe counts the records e says were forwarded. The counters are fed
// from the events Policy.Observer and the logs hear, so that the three
// never disagree.
func (m *metrics) Observe(_ context.Context, e retry.Event) {
	switch e.Outcome {
	case retry.Retrying:
		m.retried.WithLabelValues(tierTopic(m.retryTopics, e.Attempt)).Inc()
	case retry.GaveUp:
		m.deadLettered.WithLabelValues(e.Reason.Error()).Inc()
	}
}

// register registers c, or returns the collector already registered under
// the same name and labels, so that a new Processor for the same topic (after
// a restart in the same process) can share a Registerer with its predecessor.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
