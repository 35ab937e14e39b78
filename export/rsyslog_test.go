package export

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// TestSyslogToRsyslog sends every syslog event type over UDP, TCP and TLS in
// both formats to a real rsyslogd and checks what it parsed: PRI, version,
// timestamp, HOSTNAME, APP-NAME, PROCID, MSGID, structured data and body.
func TestSyslogToRsyslog(t *testing.T) {
	r := startRsyslog(t)
	formats := []struct {
		format   string
		facility string
		code     int
	}{
		{FormatJSON, "local0", 16},
		{FormatCEF, "AUTH", 4},
	}
	for _, proto := range []struct{ protocol, addr string }{
		{ProtocolUDP, r.udp}, {ProtocolTCP, r.tcp}, {ProtocolTLS, r.tls},
	} {
		for _, f := range formats {
			t.Run(proto.protocol+"/"+f.format, func(t *testing.T) {
				events := syslogEvents()
				ex := newTestExporter(t, Config{Syslog: SyslogConfig{
					Enabled: true, Address: proto.addr, Protocol: proto.protocol,
					Format: f.format, Facility: f.facility, TLSCA: r.caFile,
				}})
				for _, ev := range events {
					ex.Publish(ev.Event)
				}
				require.NoError(t, ex.Close())
				st := ex.Stats().Syslog
				require.Equal(t, QueueStats{Enabled: true, QueueCapacity: DefaultQueueSize, Sent: uint64(len(events))}, st)
				got := r.waitLines(t, proto.protocol, f.code, len(events))
				require.Len(t, got, len(events))
				for i, ev := range events {
					assertReceived(t, ev, f.code, f.format, got[i])
				}
			})
		}
	}
}

// TestSyslogTLSVerifiesCollector: the collector's certificate must chain to
// the system roots or SVC_SYSLOG_TLS_CA unless verification is turned off.
func TestSyslogTLSVerifiesCollector(t *testing.T) {
	r := startRsyslog(t)
	tests := []struct {
		name      string
		facility  string
		code      int
		ca        string
		skip      bool
		delivered bool
	}{
		{name: "untrusted collector is refused", facility: "local1", code: 17},
		{name: "explicit opt-out delivers", facility: "local2", code: 18, skip: true, delivered: true},
		{name: "trusted through SVC_SYSLOG_TLS_CA", facility: "local3", code: 19, ca: r.caFile, delivered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := newTestExporter(t, Config{Syslog: SyslogConfig{
				Enabled: true, Address: r.tls, Protocol: ProtocolTLS, Facility: tt.facility,
				TLSCA: tt.ca, TLSInsecureSkipVerify: tt.skip,
			}})
			ex.Publish(engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()})
			require.NoError(t, ex.Close())
			st := ex.Stats().Syslog
			if !tt.delivered {
				require.Equal(t, uint64(0), st.Sent)
				require.Equal(t, uint64(1), st.Errors)
				return
			}
			require.Equal(t, uint64(1), st.Sent)
			got := r.waitLines(t, ProtocolTLS, tt.code, 1)
			require.Equal(t, "lifecycle", got[0].MsgID)
		})
	}
	require.Empty(t, r.linesFrom(t, ProtocolTLS, 17), "nothing may reach an unverified collector")
}

type syslogEvent struct {
	engine.Event
	severity int
}

func syslogEvents() []syslogEvent {
	return []syslogEvent{
		{engine.Event{Type: engine.EventDecision, Body: fullDecision()}, sevWarning},
		{engine.Event{Type: engine.EventDecision, Body: minimalDecision()}, sevInfo},
		{engine.Event{Type: engine.EventDecision, Body: hostileDecision()}, sevError},
		{engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()}, sevNotice},
		{engine.Event{Type: engine.EventKillSwitch, Body: killSwitchFlipped()}, sevCritical},
	}
}

func assertReceived(t *testing.T, ev syslogEvent, facility int, format string, got received) {
	t.Helper()
	hostname, err := os.Hostname()
	require.NoError(t, err)
	hostname = string(appendField(nil, hostname, maxHostname))
	pid := strconv.Itoa(os.Getpid())
	const ts = "2026-01-02T03:04:05.123000Z"
	assert.Equal(t, fmtPRI(facility, ev.severity), got.PRI)
	assert.Equal(t, "1", got.Version)
	assert.Equal(t, ts, got.Timestamp)
	assert.Equal(t, hostname, got.Hostname)
	assert.Equal(t, "svc", got.AppName)
	assert.Equal(t, pid, got.ProcID)
	assert.Equal(t, ev.Type, got.MsgID)
	assert.Equal(t, "-", got.SD)
	prefix := "<" + got.PRI + ">1 " + ts + " " + hostname + " svc " + pid + " " + ev.Type + " - "
	assert.Equal(t, prefix+got.Msg, got.Raw, "raw message as sent")
	if format == FormatJSON {
		assertJSONBody(t, ev.Event, got.Msg)
		return
	}
	assertCEFBody(t, ev, got.Msg)
}

func assertJSONBody(t *testing.T, ev engine.Event, msg string) {
	t.Helper()
	assertASCII(t, []byte(msg))
	var body map[string]any
	require.NoError(t, jsonUnmarshal(msg, &body))
	assert.Equal(t, mustJSON(t, ev.Body), body)
	if d, ok := ev.Body.(engine.DecisionEvent); ok {
		for key, present := range map[string]bool{
			"hold_id": d.HoldID != "", "parent_decision_id": d.ParentDecisionID != "", "traceparent": d.Traceparent != "",
		} {
			_, has := body[key]
			assert.Equal(t, present, has, key)
		}
		assert.Contains(t, body, "svc_version")
		assert.Contains(t, body, "decision_id")
		assert.Contains(t, body, "envelope_hash")
	}
}

func assertCEFBody(t *testing.T, ev syslogEvent, msg string) {
	t.Helper()
	body, hadBOM := stripBOM(msg)
	assert.Equal(t, strings.ContainsFunc(body, func(r rune) bool { return r >= 0x80 }), hadBOM, "BOM iff UTF-8")
	hdr, ext, err := parseCEF(body)
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(cefSeverity(ev.severity)), hdr[6])
	switch b := ev.Body.(type) {
	case engine.DecisionEvent:
		assert.Equal(t, []string{headerText(b.RuleID), b.Verdict}, hdr[4:6])
		assert.Equal(t, expectedExtensions(b), ext)
	case engine.LifecycleEvent:
		assert.Equal(t, []string{"lifecycle", "start"}, hdr[4:6])
		assert.Equal(t, map[string]string{"rt": "1767323045123", "act": "start"}, ext)
	case engine.KillSwitchEvent:
		assert.Equal(t, []string{"kill_switch", "flipped"}, hdr[4:6])
		assert.Equal(t, b.Reason, ext["msg"])
		assert.Equal(t, "true", ext["cs1"])
	}
}

func newTestExporter(t *testing.T, cfg Config) *Exporter {
	t.Helper()
	ex, err := New(cfg, zerolog.New(zerolog.NewTestWriter(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ex.Close() })
	return ex
}

// rsyslogSplit is where rsyslog, at its default maxMessageSize, starts a
// new message in the rest of an oversized TCP or TLS frame.
const rsyslogSplit = 8097

// TestHostileEventsToRsyslog sends decisions carrying hostile values over
// UDP, TCP and TLS in both formats to a real rsyslogd, and checks that each
// event arrives as exactly one message with its values in their fields.
// The last decision is longer than rsyslog's maxMessageSize, its agent id
// placed so that, sent whole, rsyslog would read a forged kill_switch
// message out of it.
func TestHostileEventsToRsyslog(t *testing.T) {
	r := startRsyslog(t)
	for _, proto := range []struct{ protocol, addr string }{
		{ProtocolUDP, r.udp}, {ProtocolTCP, r.tcp}, {ProtocolTLS, r.tls},
	} {
		for i, format := range []string{FormatJSON, FormatCEF} {
			t.Run(proto.protocol+"/"+format, func(t *testing.T) {
				facility := 16 + i
				var events []engine.Event
				for _, h := range hostileTexts() {
					events = append(events, engine.Event{Type: engine.EventDecision, Body: withText(fullDecision(), h.value)})
				}
				oversized := forgeryAt(t, format, facility, rsyslogSplit)
				events = append(events, engine.Event{Type: engine.EventDecision, Body: oversized})
				got := sendToRsyslog(t, r, proto.protocol, proto.addr, format, facility, events)
				require.Len(t, got, len(events), "one message per event")
				for i, ev := range events[:len(events)-1] {
					assertBodyReadsBack(t, ev, format, []byte(got[i].Msg))
				}
				last := got[len(got)-1]
				assert.LessOrEqual(t, len(last.Raw), DefaultMaxMessage)
				assert.Positive(t, assertWholeOrCut(t, oversized, format, []byte(last.Msg)), "the oversized event was cut")
			})
		}
	}
}

// sendToRsyslog publishes events and then a lifecycle event as a marker,
// and returns the messages rsyslog received before the marker.
func sendToRsyslog(t *testing.T, r *rsyslog, protocol, addr, format string, facility int, events []engine.Event) []received {
	t.Helper()
	ex := newTestExporter(t, Config{Syslog: SyslogConfig{
		Enabled: true, Address: addr, Protocol: protocol, Format: format,
		Facility: "local" + strconv.Itoa(facility-16), TLSCA: r.caFile,
	}})
	for _, ev := range events {
		ex.Publish(ev)
	}
	ex.Publish(engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()})
	require.NoError(t, ex.Close())
	require.Equal(t, uint64(len(events)+1), ex.Stats().Syslog.Sent)
	var got []received
	require.Eventually(t, func() bool {
		got = r.linesFrom(t, protocol, facility)
		return len(got) > 0 && got[len(got)-1].MsgID == engine.EventLifecycle
	}, 10*time.Second, 20*time.Millisecond, "rsyslog %s input: marker not received", protocol)
	return got[:len(got)-1]
}
