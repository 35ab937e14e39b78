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

func TestEncodeEntry(t *testing.T) {
	full, hostile := fullDecision(), hostileDecision()
	tests := []struct {
		name     string
		ev       engine.Event
		msgID    string
		severity int
	}{
		{name: "allow", ev: engine.Event{Type: engine.EventDecision, Body: minimalDecision()}, msgID: "decision", severity: 6},
		{name: "require_approval by pointer", ev: engine.Event{Type: engine.EventDecision, Body: &full}, msgID: "decision", severity: 4},
		{name: "deny", ev: engine.Event{Type: engine.EventDecision, Body: hostile}, msgID: "decision", severity: 3},
		{name: "lifecycle", ev: engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()}, msgID: "lifecycle", severity: 5},
		{name: "kill_switch", ev: engine.Event{Type: engine.EventKillSwitch, Body: killSwitchFlipped()}, msgID: "kill_switch", severity: 2},
	}
	for _, tt := range tests {
		for _, format := range []string{FormatJSON, FormatCEF} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				e, err := encodeEntry(tt.ev, format, DefaultMaxMessage)
				require.NoError(t, err)
				assert.Equal(t, tt.msgID, e.msgID)
				assert.Equal(t, tt.severity, e.severity)
				assert.Equal(t, time.UnixMilli(testEpochMS).UTC(), e.time)
				if format == FormatJSON {
					assertASCII(t, e.msg)
					var got map[string]any
					require.NoError(t, json.Unmarshal(e.msg, &got))
					assert.Equal(t, mustJSON(t, tt.ev.Body), got)
				}
			})
		}
	}
}

func TestEncodeEntryRefusesWhatItCannotRender(t *testing.T) {
	var nilDecision *engine.DecisionEvent
	tests := []struct {
		name string
		ev   engine.Event
	}{
		{name: "webhook event type", ev: engine.Event{Type: engine.EventHoldCreated, Body: engine.HoldEvent{}}},
		{name: "decision with wrong body", ev: engine.Event{Type: engine.EventDecision, Body: engine.LifecycleEvent{}}},
		{name: "decision with nil pointer", ev: engine.Event{Type: engine.EventDecision, Body: nilDecision}},
		{name: "lifecycle with map body", ev: engine.Event{Type: engine.EventLifecycle, Body: map[string]any{}}},
		{name: "kill_switch without body", ev: engine.Event{Type: engine.EventKillSwitch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encodeEntry(tt.ev, FormatJSON, DefaultMaxMessage)
			require.Error(t, err)
		})
	}
}

func TestEncodeEntryWithoutEpochUsesNow(t *testing.T) {
	before := time.Now()
	l := lifecycleStart()
	l.EpochMS = 0
	e, err := encodeEntry(engine.Event{Type: engine.EventLifecycle, Body: l}, FormatJSON, DefaultMaxMessage)
	require.NoError(t, err)
	require.False(t, e.time.Before(before.Truncate(time.Millisecond)))
	require.Equal(t, time.UTC, e.time.Location())
}

func TestJSONGolden(t *testing.T) {
	tests := []struct {
		name string
		body any
	}{
		{name: "decision_full", body: fullDecision()},
		{name: "decision_minimal", body: minimalDecision()},
		{name: "decision_hostile", body: hostileDecision()},
		{name: "kill_switch_flipped", body: killSwitchFlipped()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := marshalASCII(tt.body)
			require.NoError(t, err)
			golden(t, "json_"+tt.name, got)
		})
	}
}

func TestMarshalASCII(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "ascii", in: "plain <b>&", want: `"plain <b>&"`},
		{name: "latin", in: "é", want: `"\u00e9"`},
		{name: "cjk", in: "日本", want: `"\u65e5\u672c"`},
		{name: "astral as surrogate pair", in: "🚀", want: `"\ud83d\ude80"`},
		{name: "invalid utf8", in: "a\xffb", want: `"a\ufffdb"`},
		{name: "control", in: "a\nb\x00", want: `"a\nb\u0000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := marshalASCII(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
			var back string
			require.NoError(t, json.Unmarshal(got, &back))
			require.Equal(t, strings.ToValidUTF8(tt.in, "\uFFFD"), back)
		})
	}
}

func assertASCII(t *testing.T, b []byte) {
	t.Helper()
	for i, c := range b {
		require.Less(t, c, byte(0x80), "non-ASCII octet at %d", i)
	}
}
