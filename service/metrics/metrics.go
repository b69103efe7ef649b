// Package metrics holds retryd's Prometheus collectors and its health
// endpoints. Each Metrics has its own registry, so two retryd instances in
// one process (tests do this) never share counters.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrykit/retry/service/store"
)

// Counter is what Metrics needs from a store: the number of tasks in each
// state, read on every scrape. store.Store satisfies it.
type Counter interface {
	TaskCounts(ctx context.Context) (map[store.Status]int64, error)
}

// Outcome labels of retry_attempts_total: the task's state after the
// attempt, or lease_lost when the attempt's result was discarded because
// another worker had taken the task over.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetry     = "retry"
	OutcomeExhausted = "exhausted"
	OutcomeFailed    = "failed"
	OutcomeLeaseLost = "lease_lost"
)

// Metrics records what the scheduler does. Its methods are safe for
// concurrent use, and a nil *Metrics records nothing, so callers need no
// checks.
type Metrics struct {
	reg         *prometheus.Registry
	attempts    *prometheus.CounterVec
	taskAge     *prometheus.HistogramVec
	lag         prometheus.Histogram
	deadLetters *prometheus.CounterVec
}

// New registers retryd's collectors, the Go runtime's and the process's on
// a new registry. counts, when not nil, is asked for task counts on every
// scrape (retry_tasks{status} and retry_dead_letters).
func New(counts Counter, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retry_attempts_total",
			Help: "Attempts made, by outcome (the task's state after the attempt) and policy.",
		}, []string{"outcome", "policy"}),
		taskAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retry_task_age_seconds",
			Help:    "Time from a task's creation to its terminal state, by that state.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12), // 10ms … ~48h
		}, []string{"status"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "retry_dispatch_lag_seconds",
			Help:    "Start of an attempt minus the time it was due.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retry_dead_lettered_total",
			Help: "Tasks that became dead letters (EXHAUSTED or FAILED), by that state.",
		}, []string{"status"}),
	}
	m.reg.MustRegister(m.attempts, m.taskAge, m.lag, m.deadLetters,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if counts != nil {
		m.reg.MustRegister(&statusCollector{counts: counts, log: log})
	}
	return m
}

// Handler serves the registry in the Prometheus text format, for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry returns the registry, for adding collectors of other parts.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Lag records the dispatch lag of one attempt: its start minus its due time.
// A negative lag (an attempt started early) counts as zero.
func (m *Metrics) Lag(d time.Duration) {
	if m == nil {
		return
	}
	m.lag.Observe(max(d, 0).Seconds())
}

// Attempt counts one attempt by outcome (one of the Outcome… constants) and
// policy ID.
func (m *Metrics) Attempt(outcome, policy string) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(outcome, policy).Inc()
}

// Terminal records a task that reached a terminal state: its age, and for
// EXHAUSTED and FAILED, one more dead letter.
func (m *Metrics) Terminal(status store.Status, age time.Duration) {
	if m == nil {
		return
	}
	m.taskAge.WithLabelValues(string(status)).Observe(max(age, 0).Seconds())
	if status == store.Exhausted || status == store.Failed {
		m.deadLetters.WithLabelValues(string(status)).Inc()
	}
}
