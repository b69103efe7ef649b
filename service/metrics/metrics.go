// Package metrics holds retryd's Prometheus collectors and its health
// endpoints. Each Metrics has its own registry, so two retryd instances in
// one process (tests do this) never share counters. Attempts are counted
// from the scheduler's events: Metrics is a retry.Observer, and hears the
// task's tenant through ObserveTenant.
//
// The collectors:
//
//	retry_attempts_total{outcome, policy, tenant}  attempts, by outcome (below), tenant and policy ID (bounded: see Limits)
//	retry_attempt_duration_seconds{outcome}        how long each attempt took, by outcome
//	retry_dispatch_lag_seconds                     start of an attempt minus its due time
//	retry_task_age_seconds{status}                 creation to terminal state, by that state
//	retry_dead_lettered_total{status}              tasks that became EXHAUSTED or FAILED
//	retry_held_total{host, reason}                 tasks held back by their target host's limiter (bounded: MaxHostLabels)
//	retry_tasks{status}, retry_dead_letters        the store's counts, read on each scrape
//
// and, as the destination gate's Recorder (the destination label bounded:
// see Limits):
//
//	retry_destination_held_total{tenant, destination, reason}  attempts the gate held back, by reason
//	retry_destination_in_flight{tenant, destination}           this instance's attempts in flight to a destination with maxInFlight
//	retry_destination_status{tenant, destination, status}      1 for the destination's status as last read, 0 for the other two
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// Counter is what Metrics needs from a store: the number of tasks in each
// state, read on every scrape. store.Store satisfies it.
type Counter interface {
	TaskCounts(ctx context.Context) (map[store.Status]int64, error)
}

// Outcome labels of retry_attempts_total and retry_attempt_duration_seconds:
// the task's state after the attempt, as its retry.Event tells it
// (Succeeded; Retrying; GaveUp, failed when the reason is
// retry.ErrNotRetryable, exhausted otherwise), or lease_lost when the
// attempt's result was discarded because another worker had taken the task
// over.
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
	attempts    *attempts
	durations   *prometheus.HistogramVec
	durationBy  [len(attemptOutcomes)]prometheus.Observer // durations' series, by attemptOutcomes' index
	taskAge     *prometheus.HistogramVec
	lag         prometheus.Histogram
	deadLetters *prometheus.CounterVec
	held        *held
	dest        *destinations
	hist        history // the last hour, for the console (Recent)
}

// New registers retryd's collectors, the Go runtime's and the process's on
// a new registry. counts, when not nil, is asked for task counts on every
// scrape (retry_tasks{status} and retry_dead_letters). lim bounds the
// policy labels of retry_attempts_total and the destination labels of the
// retry_destination_… collectors; its zero value takes the defaults.
func New(counts Counter, log *slog.Logger, lim Limits) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg:      prometheus.NewRegistry(),
		attempts: newAttempts(lim, log),
		held:     newHeld(),
		dest:     newDestinations(lim, log),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "retry_attempt_duration_seconds",
			Help:    "Time an attempt took, from sending the request to its answer or error, by outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"outcome"}),
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
	for i, o := range attemptOutcomes {
		m.durationBy[i] = m.durations.WithLabelValues(o)
	}
	m.reg.MustRegister(m.attempts.vec, m.held.vec, m.dest.held, m.dest.inFlight, m.dest.status, m.durations, m.taskAge, m.lag, m.deadLetters,
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

// Lag records the dispatch lag of one attempt of tenant's: its start minus
// its due time. A negative lag (an attempt started early) counts as zero.
func (m *Metrics) Lag(tenant string, d time.Duration) {
	if m == nil {
		return
	}
	d = max(d, 0)
	m.lag.Observe(d.Seconds())
	m.hist.lag(tenant, d, time.Now())
}

// Recent returns tenant's activity over the last HistoryWindow, one Sample
// per HistoryStep, oldest first: what this process's scheduler recorded
// (each instance sharing a store keeps its own).
func (m *Metrics) Recent(tenant string) []Sample {
	if m == nil {
		return nil
	}
	return m.hist.recent(tenant, time.Now())
}

// Observe counts the attempt e ended as ObserveTenant does, under the
// tenant "" (no tenant): for callers that have none. Metrics is a
// retry.Observer.
func (m *Metrics) Observe(ctx context.Context, e retry.Event) {
	m.ObserveTenant(ctx, "", e)
}

// ObserveTenant counts the attempt e ended, by outcome (see the Outcome…
// constants), tenant and policy ID (e.Name; OtherPolicy beyond the
// Limits), and records its duration. The scheduler calls it for every
// recorded attempt, with the task's tenant (scheduler.TenantObserver).
func (m *Metrics) ObserveTenant(_ context.Context, tenant string, e retry.Event) {
	if m == nil {
		return
	}
	i := outcomeIndex(&e)
	m.attempts.inc(tenant, e.Name, i)
	m.durationBy[i].Observe(max(e.Duration, 0).Seconds())
	m.hist.outcome(tenant, i, time.Now())
}

// attemptOutcomes are the labels an attempt's event is counted under.
var attemptOutcomes = [...]string{OutcomeSucceeded, OutcomeRetry, OutcomeExhausted, OutcomeFailed}

// outcomeIndex names e's outcome as retry_attempts_total always has: its
// index in attemptOutcomes.
func outcomeIndex(e *retry.Event) int {
	switch {
	case e.Outcome == retry.Succeeded:
		return 0
	case e.Outcome == retry.Retrying:
		return 1
	case errors.Is(e.Reason, retry.ErrNotRetryable):
		return 3
	}
	return 2
}

// LeaseLost counts an attempt of tenant's policy whose outcome was dropped
// because its lease had run out and another worker had taken the task
// over; the policy label is bounded as ObserveTenant's.
func (m *Metrics) LeaseLost(tenant, policy string) {
	if m == nil {
		return
	}
	m.attempts.inc(tenant, policy, leaseLostIndex)
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
