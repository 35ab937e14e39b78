package export

import (
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
)

// Exporter is the engine's Publisher: it routes decision, lifecycle and
// kill_switch events to the syslog queue and hold.* and freeze.flipped
// events to the webhook queue. A destination that is not configured ignores
// its events, so an Exporter with nothing enabled is a no-op.
type Exporter struct {
	syslog    *queue
	webhook   *queue
	drain     time.Duration
	closeOnce sync.Once
}

var _ engine.Publisher = (*Exporter)(nil)

// Stats is the export block of /healthz; its counters suit metrics gauges.
type Stats struct {
	Syslog  QueueStats `json:"syslog"`
	Webhook QueueStats `json:"webhook"`
}

// New validates cfg (after filling defaults) and starts a worker for each
// enabled destination. Close stops them.
func New(cfg Config, log zerolog.Logger) (*Exporter, error) {
	cfg.SetDefaults()
	roots, err := cfg.validate()
	if err != nil {
		return nil, fmt.Errorf("export config: %w", err)
	}
	e := &Exporter{drain: cfg.DrainTimeout}
	if cfg.Syslog.Enabled {
		s, err := newSyslogSink(cfg.Syslog, roots)
		if err != nil {
			return nil, fmt.Errorf("export config: %w", err)
		}
		e.syslog = startQueue("syslog", cfg.Syslog.QueueSize, s, log)
	}
	if cfg.Webhook.Enabled() {
		e.webhook = startQueue("webhook", cfg.Webhook.QueueSize, newWebhookSink(cfg.Webhook), log)
	}
	return e, nil
}

// Publish enqueues ev for its destination. It never blocks and never fails:
// a full queue drops the event and counts it; unknown types are ignored.
func (e *Exporter) Publish(ev engine.Event) {
	switch ev.Type {
	case engine.EventDecision, engine.EventLifecycle, engine.EventKillSwitch:
		e.syslog.push(ev)
	case engine.EventHoldCreated, engine.EventHoldResolved, engine.EventHoldExpired, engine.EventFreezeFlipped:
		e.webhook.push(ev)
	}
}

// Stats reports queue depth and counters of each destination.
func (e *Exporter) Stats() Stats {
	return Stats{Syslog: e.syslog.stats(), Webhook: e.webhook.stats()}
}

// Close stops intake, drains both queues in parallel for at most the drain
// timeout, then logs each queue's final counts (dropped included). Events
// published afterwards are dropped and counted. Safe to call more than once.
func (e *Exporter) Close() error {
	e.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, q := range []*queue{e.syslog, e.webhook} {
			wg.Go(func() { q.close(e.drain) })
		}
		wg.Wait()
	})
	return nil
}
