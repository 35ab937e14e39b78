package metrics

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/engine"
)

// scrapeTimeout bounds the hold count query of one scrape.
const scrapeTimeout = 5 * time.Second

// HoldCounter counts holds by status as of now, reporting a pending or
// approved hold whose expiry has passed as expired (as Holds.List does).
// The hold store implements it.
type HoldCounter interface {
	CountByStatus(ctx context.Context, now time.Time) (map[string]int, error)
}

// QueueStats are one export queue's figures at scrape time.
type QueueStats struct {
	Destination string // syslog or webhook
	Depth       int    // events waiting
	Capacity    int
	Dropped     uint64 // refused by a full or closed queue, or abandoned at shutdown
	Sent        uint64 // delivered
	Errors      uint64 // failed after the sink's retries
}

// QueueSource reports the enabled export queues.
type QueueSource interface {
	Queues() []QueueStats
}

// holdStatuses are always reported, at zero when no hold has the status.
var holdStatuses = []string{
	engine.HoldPending, engine.HoldApproved, engine.HoldRejected, engine.HoldExpired, engine.HoldConsumed,
}

var holdsDesc = prometheus.NewDesc("svc_holds", "Holds in the store, by status.", []string{"status"}, nil)

// holdsCollector queries the hold store at scrape time, so the figures are
// exact (expiry included) and the decision path keeps no gauge.
type holdsCollector struct {
	counter HoldCounter
	now     func() time.Time
}

// Describe implements prometheus.Collector.
func (h *holdsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- holdsDesc }

// Collect counts the holds by status at scrape time.
func (h *holdsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := h.counter.CountByStatus(ctx, h.now())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(holdsDesc, err)
		return
	}
	statuses := append([]string(nil), holdStatuses...)
	for status := range counts {
		if !slices.Contains(holdStatuses, status) {
			statuses = append(statuses, status)
		}
	}
	slices.Sort(statuses)
	for _, status := range statuses {
		ch <- prometheus.MustNewConstMetric(holdsDesc, prometheus.GaugeValue, float64(counts[status]), status)
	}
}

var (
	queueDepthDesc = prometheus.NewDesc("svc_export_queue_depth",
		"Events waiting in an export queue.", []string{"destination"}, nil)
	queueCapacityDesc = prometheus.NewDesc("svc_export_queue_capacity",
		"Capacity of an export queue.", []string{"destination"}, nil)
	queueDroppedDesc = prometheus.NewDesc("svc_export_dropped_total",
		"Events an export queue dropped: refused when full or closed, or abandoned at shutdown.",
		[]string{"destination"}, nil)
	queueSentDesc = prometheus.NewDesc("svc_export_sent_total",
		"Events delivered to an export destination.", []string{"destination"}, nil)
	queueErrorsDesc = prometheus.NewDesc("svc_export_errors_total",
		"Events that failed delivery after the sink's retries.", []string{"destination"}, nil)
)

// exportCollector reads the export queues' own counters at scrape time.
type exportCollector struct {
	source QueueSource
}

// Describe implements prometheus.Collector.
func (e *exportCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queueDepthDesc, queueCapacityDesc, queueDroppedDesc, queueSentDesc, queueErrorsDesc} {
		ch <- d
	}
}

// Collect reports each enabled export queue's figures.
func (e *exportCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range e.source.Queues() {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(q.Depth), q.Destination)
		ch <- prometheus.MustNewConstMetric(queueCapacityDesc, prometheus.GaugeValue, float64(q.Capacity), q.Destination)
		ch <- prometheus.MustNewConstMetric(queueDroppedDesc, prometheus.CounterValue, float64(q.Dropped), q.Destination)
		ch <- prometheus.MustNewConstMetric(queueSentDesc, prometheus.CounterValue, float64(q.Sent), q.Destination)
		ch <- prometheus.MustNewConstMetric(queueErrorsDesc, prometheus.CounterValue, float64(q.Errors), q.Destination)
	}
}
