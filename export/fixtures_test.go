package export

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/<name>.golden byte for byte, or rewrites
// the file under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; regenerate with go test ./export -run %s -update", t.Name())
	require.Equal(t, string(want), string(got))
}

const testEpochMS = 1767323045123 // 2026-01-02T03:04:05.123Z

// fullDecision is a require_approval decision carrying every optional field.
func fullDecision() engine.DecisionEvent {
	return engine.DecisionEvent{
		TS:                "2026-01-02T03:04:05.123Z",
		Event:             engine.EventDecision,
		Verdict:           engine.RequireApproval,
		RuleID:            "svc.policy/bulk_delete",
		Verb:              "delete",
		RawVerb:           "remove",
		Ability:           "files.delete",
		Axes:              envelope.Axes{Reversibility: "irreversible", BlastRadius: "org", Externality: "internal"},
		MagnitudeCount:    250,
		SessionID:         "sess-1",
		AgentID:           "agent-7",
		OnBehalfOf:        "alice@example.com",
		Environment:       "production",
		RawEnvironment:    "prod",
		Mode:              "enforce",
		DecisionLatencyMS: 12,
		Reason:            "bulk delete of 250 objects needs approval",
		SvcVersion:        "0.2.0",
		EpochMS:           testEpochMS,
		DecisionID:        "0f8fad5bd9cb469fa16570867728950e",
		EnvelopeHash:      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		HoldID:            "hold-42",
		ParentDecisionID:  "7c9e6679742540de944be07fc1f90ae7",
		Traceparent:       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Gate:              "gw-1",
	}
}

// minimalDecision is an allow decision without any optional field.
func minimalDecision() engine.DecisionEvent {
	return engine.DecisionEvent{
		TS:           "2026-01-02T03:04:05.123Z",
		Event:        engine.EventDecision,
		Verdict:      engine.Allow,
		RuleID:       "svc.policy/default_allow",
		Verb:         "read",
		Ability:      "files.read",
		Axes:         envelope.Axes{Reversibility: "reversible", BlastRadius: "self", Externality: "internal"},
		SessionID:    "sess-2",
		AgentID:      "agent-8",
		OnBehalfOf:   "bob",
		Environment:  "dev",
		Mode:         "observe",
		SvcVersion:   "0.2.0",
		EpochMS:      testEpochMS,
		DecisionID:   "1f8fad5bd9cb469fa16570867728950e",
		EnvelopeHash: "8f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	}
}

// hostileDecision is a deny whose agent-controlled strings try to break out
// of their CEF fields and carry non-ASCII text.
func hostileDecision() engine.DecisionEvent {
	d := minimalDecision()
	d.Verdict = engine.Deny
	d.RuleID = `svc.policy/x|CEF:0|evil|\`
	d.Verb = "send|mail"
	d.OnBehalfOf = `domain\user`
	d.SessionID = "s act=forged cs1=forged"
	d.AgentID = "agent\nrt=0"
	d.Reason = "línea uno\r\nzweite Zeile=✓ 日本語 🚀 tab\there nul\x00end"
	d.Mode = `enforce\`
	d.SvcVersion = "0.2.0|dev"
	return d
}

func lifecycleStart() engine.LifecycleEvent {
	return engine.LifecycleEvent{
		TS: "2026-01-02T03:04:05.123Z", Event: engine.EventLifecycle, Action: "start",
		SvcVersion: "0.2.0", EpochMS: testEpochMS,
	}
}

func killSwitchFlipped() engine.KillSwitchEvent {
	return engine.KillSwitchEvent{
		TS: "2026-01-02T03:04:05.123Z", Event: engine.EventKillSwitch, Action: "flipped",
		Frozen: true, Reason: "incident 7: stop all writes", By: "human:carol",
		SvcVersion: "0.2.0", EpochMS: testEpochMS,
	}
}
