package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrykit/retry/service/store"
)

var (
	tasksDesc = prometheus.NewDesc("retry_tasks",
		"Tasks in the store, by status.", []string{"status"}, nil)
	deadLettersDesc = prometheus.NewDesc("retry_dead_letters",
		"Dead letters in the store: EXHAUSTED and FAILED tasks.", nil, nil)
	statuses = []store.Status{store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed, store.Cancelled}
)

// statusCollector reads the task counts from the store at scrape time, so
// the gauges are never stale and cost nothing between scrapes.
type statusCollector struct {
	counts Counter
	log    *slog.Logger
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tasksDesc
	ch <- deadLettersDesc
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.counts.TaskCounts(ctx)
	if err != nil {
		// Leaving the gauges out says "unknown", where zeros would lie.
		c.log.Warn("metrics: cannot count tasks", "error", err)
		return
	}
	for _, s := range statuses {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.GaugeValue,
		float64(counts[store.Exhausted]+counts[store.Failed]))
}
