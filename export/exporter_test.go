package export

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func allEventTypes() []engine.Event {
	return []engine.Event{
		{Type: engine.EventDecision, Body: minimalDecision()},
		{Type: engine.EventLifecycle, Body: lifecycleStart()},
		{Type: engine.EventKillSwitch, Body: killSwitchFlipped()},
		{Type: engine.EventHoldCreated, Body: holdCreated()},
		{Type: engine.EventFreezeFlipped, Body: engine.FreezeEvent{Event: engine.EventFreezeFlipped, Frozen: true}},
		{Type: engine.EventHoldResolution, Body: holdCreated()}, // audit-only kind: not exported
		{Type: "unknown"},
	}
}

func TestDisabledExporterIsNoOp(t *testing.T) {
	ex := newTestExporter(t, Config{})
	for _, ev := range allEventTypes() {
		ex.Publish(ev)
	}
	assert.Equal(t, Stats{}, ex.Stats())
	require.NoError(t, ex.Close())
	require.NoError(t, ex.Close())
	ex.Publish(engine.Event{Type: engine.EventDecision, Body: minimalDecision()})
	assert.Equal(t, Stats{}, ex.Stats())
}

func TestExporterRoutesByType(t *testing.T) {
	collector := startTCPCollector(t, 0)
	hooks := startHookServer(t)
	ex := newTestExporter(t, Config{
		Syslog:  SyslogConfig{Enabled: true, Address: collector.addr, Protocol: ProtocolTCP},
		Webhook: WebhookConfig{URL: hooks.URL},
	})
	for _, ev := range allEventTypes() {
		ex.Publish(ev)
	}
	require.NoError(t, ex.Close())
	st := ex.Stats()
	assert.Equal(t, uint64(3), st.Syslog.Sent)
	assert.Equal(t, uint64(2), st.Webhook.Sent)
	var msgIDs []string
	for range 3 {
		f := collector.next(t)
		msgIDs = append(msgIDs, hdrField(t, f.msg, 5))
	}
	assert.Equal(t, []string{"decision", "lifecycle", "kill_switch"}, msgIDs)
	var hookTypes []string
	for _, r := range hooks.requests() {
		hookTypes = append(hookTypes, r.header.Get("X-Svc-Event"))
	}
	assert.Equal(t, []string{"hold.created", "freeze.flipped"}, hookTypes)
}

// TestExporterCountsUnrenderableEvents: a syslog event whose body the
// encoder does not know is an error, not a crash, and later events still go.
func TestExporterCountsUnrenderableEvents(t *testing.T) {
	collector := startTCPCollector(t, 0)
	ex := newTestExporter(t, Config{Syslog: SyslogConfig{Enabled: true, Address: collector.addr, Protocol: ProtocolTCP}})
	ex.Publish(engine.Event{Type: engine.EventDecision, Body: "not a decision"})
	ex.Publish(engine.Event{Type: engine.EventDecision, Body: minimalDecision()})
	require.NoError(t, ex.Close())
	st := ex.Stats().Syslog
	assert.Equal(t, uint64(1), st.Errors)
	assert.Equal(t, uint64(1), st.Sent)
}

func TestPublishAfterCloseIsDropped(t *testing.T) {
	collector := startTCPCollector(t, 0)
	hooks := startHookServer(t)
	ex := newTestExporter(t, Config{
		Syslog:  SyslogConfig{Enabled: true, Address: collector.addr, Protocol: ProtocolTCP},
		Webhook: WebhookConfig{URL: hooks.URL},
	})
	require.NoError(t, ex.Close())
	for _, ev := range allEventTypes() {
		ex.Publish(ev)
	}
	st := ex.Stats()
	assert.Equal(t, uint64(3), st.Syslog.Dropped)
	assert.Equal(t, uint64(2), st.Webhook.Dropped)
	assert.Empty(t, hooks.requests())
}

func TestConcurrentPublishAndClose(t *testing.T) {
	collector := startTCPCollector(t, 0)
	ex := newTestExporter(t, Config{DrainTimeout: time.Second, Syslog: SyslogConfig{Enabled: true, Address: collector.addr, Protocol: ProtocolTCP}})
	const publishers, each = 8, 200
	done := make(chan struct{})
	for range publishers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range each {
				ex.Publish(engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()})
			}
		}()
	}
	require.NoError(t, ex.Close())
	for range publishers {
		<-done
	}
	assertAccounted(t, ex.Stats().Syslog, publishers*each)
}

func TestStatsJSON(t *testing.T) {
	raw, err := json.Marshal(Stats{Syslog: QueueStats{Enabled: true, QueueDepth: 2, QueueCapacity: 1000, Dropped: 3, Sent: 4, Errors: 5}})
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"syslog": {"enabled": true, "queue_depth": 2, "queue_capacity": 1000, "dropped": 3, "sent": 4, "errors": 5},
		"webhook": {"enabled": false, "queue_depth": 0, "queue_capacity": 0, "dropped": 0, "sent": 0, "errors": 0}
	}`, string(raw))
}

// hdrField returns the n-th space-separated field of a syslog message
// (0 is <PRI>VERSION).
func hdrField(t *testing.T, msg string, n int) string {
	t.Helper()
	fields := strings.SplitN(msg, " ", n+2)
	require.Greater(t, len(fields), n)
	return fields[n]
}
