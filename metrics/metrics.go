// Package metrics serves svc's Prometheus metrics (GET /metrics): decisions
// by verdict and rule, decide and policy-evaluation latency, evaluation
// failures, holds by status, and export queue depth and drops.
//
// It is its own package because it is the one place that imports
// client_golang. The engine reports through the small engine.Observer
// interface, which Collector implements; the hold store and the export
// queues are read at scrape time through the HoldCounter and QueueSource
// interfaces defined here. So neither the engine nor the stores depend on
// Prometheus, and the decision path pays only for a counter increment and
// two histogram observations.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svc-dev/svc/engine"
)

// latencyBuckets span a sub-millisecond decision (opa server mode) to one
// that hits the evaluation timeout, in seconds.
var latencyBuckets = []float64{
	0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Collector holds svc's metrics. It is safe for concurrent use.
type Collector struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	decide    prometheus.Histogram
	eval      prometheus.Histogram
	evalFails prometheus.Counter
}

var _ engine.Observer = (*Collector)(nil)

// Sources are what the collector reads at scrape time; a nil source is not
// reported.
type Sources struct {
	Holds  HoldCounter
	Export QueueSource
	Pack   PackSource       // the evaluator, when it can keep a stale pack (opa server mode)
	Now    func() time.Time // clock for hold expiry; time.Now when nil
}

// New returns a Collector with the decision metrics, the scrape-time
// metrics of src, and the Go runtime and process metrics (memory, CPU,
// open files) on a registry of its own.
func New(src Sources) *Collector {
	c := &Collector{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_decisions_total",
			Help: "Decisions on /v1/decide, by verdict and rule (requests refused as invalid are not decisions).",
		}, []string{"verdict", "rule"}),
		decide: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_decide_duration_seconds",
			Help:    "Time from a decide request's arrival until its decision was on record.",
			Buckets: latencyBuckets,
		}),
		eval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_opa_evaluation_duration_seconds",
			Help:    "Time of one policy evaluation by OPA, failed ones included.",
			Buckets: latencyBuckets,
		}),
		evalFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_opa_evaluation_failures_total",
			Help: "Policy evaluations that failed or returned no valid verdict (each answered deny).",
		}),
	}
	c.reg.MustRegister(c.decisions, c.decide, c.eval, c.evalFails,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if src.Holds != nil {
		now := src.Now
		if now == nil {
			now = time.Now
		}
		c.reg.MustRegister(&holdsCollector{counter: src.Holds, now: now})
	}
	if src.Export != nil {
		c.reg.MustRegister(&exportCollector{source: src.Export})
	}
	if src.Pack != nil {
		c.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_policy_pack_stale",
			Help: "1 while an edit of the policy pack failed to load and the previous pack still decides (opa server mode), else 0.",
		}, func() float64 {
			if stale, _ := src.Pack.PackStatus(); stale {
				return 1
			}
			return 0
		}))
	}
	return c
}

// PackSource reports whether the policy pack in force is stale: an edit
// failed to load, and the previous pack still decides.
type PackSource interface {
	PackStatus() (stale bool, err error)
}

// Decided implements engine.Observer.
func (c *Collector) Decided(verdict, rule string, latency time.Duration) {
	c.decisions.WithLabelValues(verdict, rule).Inc()
	c.decide.Observe(latency.Seconds())
}

// Evaluated implements engine.Observer.
func (c *Collector) Evaluated(latency time.Duration, err error) {
	c.eval.Observe(latency.Seconds())
	if err != nil {
		c.evalFails.Inc()
	}
}

// Handler serves the metrics in the Prometheus text format. A source that
// fails at scrape time leaves out its metrics, not the others, and counts
// in promhttp_metric_handler_errors_total.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      c.reg,
	})
}
