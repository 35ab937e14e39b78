package cmd

import (
	"net/http"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/export"
	"github.com/svc-dev/svc/metrics"
)

// newMetrics returns the metrics collector, which is the engine's Observer,
// and the handler of GET /metrics. holds is counted by status at every
// scrape; exp reports its export queues; eval, when it can keep a stale
// policy pack (opa server mode), whether it does.
func newMetrics(holds metrics.HoldCounter, exp *export.Exporter, eval engine.Evaluator) (*metrics.Collector, http.Handler) {
	pack, _ := eval.(metrics.PackSource)
	c := metrics.New(metrics.Sources{Holds: holds, Export: exportQueues{exp}, Pack: pack})
	return c, c.Handler()
}

// exportQueues adapts the exporter's stats to the metrics package, which
// does not import export.
type exportQueues struct{ exp *export.Exporter }

// Queues implements metrics.QueueSource: the enabled queues only.
func (q exportQueues) Queues() []metrics.QueueStats {
	st := q.exp.Stats()
	var out []metrics.QueueStats
	for _, s := range []struct {
		name string
		export.QueueStats
	}{{"syslog", st.Syslog}, {"webhook", st.Webhook}} {
		if !s.Enabled {
			continue
		}
		out = append(out, metrics.QueueStats{Destination: s.name, Depth: s.QueueDepth, Capacity: s.QueueCapacity,
			Dropped: s.Dropped, Sent: s.Sent, Errors: s.Errors})
	}
	return out
}
