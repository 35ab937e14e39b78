package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Connector holds the metrics of `svc connector`: its counters (read at
// scrape time from the connector's own, so /metrics and /healthz agree),
// the latency of each tool call (engine round trips and hold wait
// included) and of each answered request. It implements the connector's
// Observer interface.
type Connector struct {
	reg      *prometheus.Registry
	toolCall *prometheus.HistogramVec
	answered *prometheus.HistogramVec
}

// NewConnector returns the connector's metrics; counters reads the
// connector's counters by name, and names lists them.
func NewConnector(names []string, counters func() map[string]int64) *Connector {
	c := &Connector{
		reg: prometheus.NewRegistry(),
		toolCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_connector_tool_call_duration_seconds",
			Help:    "Time to decide one tool call (engine round trips and any hold wait), by outcome.",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
		answered: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_connector_request_duration_seconds",
			Help:    "Time from a gateway request's arrival to its answer, by route.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
	}
	c.reg.MustRegister(c.toolCall, c.answered,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, name := range names {
		c.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "svc_connector_" + name + "_total",
			Help: "Connector counter " + name + " (as in GET /healthz).",
		}, func() float64 { return float64(counters()[name]) }))
	}
	return c
}

// ToolCall records one tool call's outcome and latency.
func (c *Connector) ToolCall(outcome string, latency time.Duration) {
	c.toolCall.WithLabelValues(outcome).Observe(latency.Seconds())
}

// Answered records one answered request.
func (c *Connector) Answered(route string, latency time.Duration) {
	c.answered.WithLabelValues(route).Observe(latency.Seconds())
}

// Handler serves the metrics in the Prometheus text format.
func (c *Connector) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: c.reg})
}
