package ledger

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// TestMarshalRecord checks that the audit line of every kind of record is
// json.Marshal's, byte for byte, the decision record whose policy input is
// appended as it is included.
func TestMarshalRecord(t *testing.T) {
	env, err := envelope.ParseEnvelope([]byte(`{"svc_version": "0.2",
		"agent": {"id": "agent-<7>", "on_behalf_of": "human:a&b", "session_id": "sess-\u2028"},
		"action": {"namespace": "db", "verb": "Remove", "ability": "db/delete_records"},
		"target": {"kind": "table", "ref": "core.<user>", "environment": "PRD"},
		"params": {"where": "a < b && c > d", "limit": 1000, "nested": {"z": [1, 2.5, "é"], "a": null}},
		"magnitude": {"count": 3},
		"axes": {"reversibility": "Irreversible", "blast_radius": "BROAD", "externality": "internal"},
		"approval": {"present": false, "hold_id": null}, "trajectory_ref": null,
		"context": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "mode": "observe"},
		"meta": {"timestamp": "2026-11-21T10:00:00Z", "nonce": "n-1", "signature": "stub"}}`))
	require.NoError(t, err)
	input, err := engine.PolicyInputOf(env, engine.Cumulative{WindowSeconds: 3600,
		Usage: engine.Usage{Totals: engine.Totals{Deletes: 2}, Money: engine.Amounts{"EUR": 150}}}, true)
	require.NoError(t, err)
	ev := engine.DecisionEvent{TS: "2026-11-26T18:00:00.000Z", Event: engine.EventDecision, Verdict: engine.Deny,
		RuleID: "svc.policy/r", Reason: "<why> & how", Verb: "delete", RawVerb: "Remove", Ability: "db/x",
		Axes: env.Axes, MagnitudeCount: -3, SessionID: "sess-\u2028", AgentID: "a\"b", OnBehalfOf: "h\\",
		Environment: "production", RawEnvironment: "PRD", Mode: "observe", DecisionLatencyMS: 12,
		SvcVersion: "1.2.3", EpochMS: 1795000000000, DecisionID: "d-1", EnvelopeHash: "sha256:00",
		HoldID: "h-1", HoldReused: true, ParentDecisionID: "d-0", Traceparent: "00-1", Gate: "g\x01",
		Obligations: []string{"log_params", "notify\xff"}, ShadowVerdict: engine.Allow, ShadowRule: "s/r",
		ShadowReason: "\u2029"}
	bare := engine.DecisionEvent{TS: "t", Event: engine.EventDecision, Obligations: []string{}}
	for name, record := range map[string]any{
		"decision with its input":     engine.AuditedDecision{DecisionEvent: ev, PolicyDecision: engine.RequireApproval, PolicyRule: "svc.policy/r", PolicyInput: input},
		"decision without an input":   engine.AuditedDecision{DecisionEvent: ev},
		"input without policy fields": engine.AuditedDecision{DecisionEvent: ev, PolicyInput: input},
		"empty decision":              engine.AuditedDecision{PolicyInput: input},
		"bare decision":               engine.AuditedDecision{DecisionEvent: bare},
		"bare decision, input":        engine.AuditedDecision{DecisionEvent: bare, PolicyInput: input},
		"decision event":              ev,
		"hold event":                  engine.HoldEvent{Event: engine.EventHoldResolution, HoldID: "h-1", DecisionID: "d-1"},
		"map":                         map[string]any{"decision_id": "d-2", "x": "<y>"},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(record)
			require.NoError(t, err)
			got, err := marshalRecord(record)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}
