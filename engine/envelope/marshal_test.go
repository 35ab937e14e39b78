package envelope

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMarshalWireRoundTrips: a parsed envelope, written back with
// MarshalWire, parses to the same envelope (its unknown members to the same
// JSON values).
func TestMarshalWireRoundTrips(t *testing.T) {
	for _, name := range []string{"full.json", "minimal.json"} {
		t.Run(name, func(t *testing.T) {
			env, err := ParseEnvelope(readEnvelope(t, name))
			require.NoError(t, err)
			body, err := env.MarshalWire()
			require.NoError(t, err)
			again, err := ParseEnvelope(body)
			require.NoError(t, err)
			require.Len(t, again.Extra, len(env.Extra))
			for k, v := range env.Extra {
				assert.JSONEq(t, string(v), string(again.Extra[k]), "unknown members are written back compacted")
			}
			env.Extra, again.Extra = nil, nil
			assert.Equal(t, env, again)
		})
	}
}

// gatewayEnvelope is an envelope built as a connector builds one, from
// canonical values only.
func gatewayEnvelope() *Envelope {
	return &Envelope{
		Agent:     Agent{ID: "gateway:acme/gpt-4o", OnBehalfOf: "human:alice", SessionID: "gateway:acme:s-1"},
		Action:    Action{Namespace: "gateway", Verb: "delete", Ability: "gateway/purge_rows"},
		Target:    Target{Kind: "tool", Ref: "purge_rows", Environment: "production"},
		Params:    map[string]any{"ids": []any{1, 2, 3}},
		Magnitude: Magnitude{Count: 3},
		Axes:      Axes{Reversibility: "irreversible", BlastRadius: "broad", Externality: "internal"},
		Context:   map[string]any{"model": "gpt-4o"},
		Mode:      ModeObserve,
	}
}

// TestMarshalWireBuiltEnvelope: an envelope built from canonical values
// is written with them and its mode, and reads back as built.
func TestMarshalWireBuiltEnvelope(t *testing.T) {
	env := gatewayEnvelope()
	body, err := env.MarshalWire()
	require.NoError(t, err)
	got, err := ParseEnvelope(body)
	require.NoError(t, err)
	assert.Equal(t, "delete", got.Action.Verb)
	assert.Equal(t, "production", got.Target.Environment)
	assert.Equal(t, ModeObserve, got.Mode)
	assert.Equal(t, int64(3), got.Magnitude.Count)
	assert.Equal(t, "gateway:acme:s-1", got.Agent.SessionID)
	assert.Nil(t, env.Context["mode"], "the caller's context is not changed")
	wantHash, err := env.Hash()
	require.NoError(t, err)
	gotHash, err := got.Hash()
	require.NoError(t, err)
	assert.Equal(t, wantHash, gotHash, "the engine hashes what was built")
}

// TestMarshalWireRefusesWhatTheEngineRefuses: MarshalWire returns the
// engine's refusal, naming the field, instead of a document.
func TestMarshalWireRefusesWhatTheEngineRefuses(t *testing.T) {
	tests := map[string]struct {
		mutate func(*Envelope)
		field  string
	}{
		"no count":       {func(e *Envelope) { e.Magnitude.Count = 0 }, "magnitude.count"},
		"no agent id":    {func(e *Envelope) { e.Agent.ID = "" }, "agent.id"},
		"unknown axis":   {func(e *Envelope) { e.Axes.BlastRadius = "huge" }, "axes.blast_radius"},
		"inexact number": {func(e *Envelope) { e.Params["n"] = json.Number("9007199254740993") }, "params.n"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			env := gatewayEnvelope()
			tt.mutate(env)
			body, err := env.MarshalWire()
			var invalid *InvalidEnvelope
			require.ErrorAs(t, err, &invalid)
			assert.Equal(t, tt.field, invalid.Field)
			assert.Nil(t, body)
		})
	}
}

// TestVerbOf reads tool names as verbs, and says when none of a name's
// words is known.
func TestVerbOf(t *testing.T) {
	tests := []struct {
		name, verb string
		known      bool
	}{
		{"purge_rows", "delete", true},
		{"sendEmail", "emit", true},
		{"run_shell", "execute", true},
		{"get_weather", "read", true},
		{"ＤＥＬＥＴＥ-user", "delete", true},
		{"de1ete_records", "delete", true},
		{"refund_payment", "transact", true},
		{"sending", "emit", true},
		{"weather", "", false},
		{"frobnicate", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verb, known := VerbOf(tt.name)
			assert.Equal(t, tt.known, known)
			assert.Equal(t, tt.verb, verb)
		})
	}
}

// TestVerbOfAgreesWithCanonicalVerb: a name VerbOf knows is the verb
// CanonicalVerb reads it as, whatever the reversibility; one it does not
// know is CanonicalVerb's default.
func TestVerbOfAgreesWithCanonicalVerb(t *testing.T) {
	names := []string{"weather", "frobnicate", "noop"}
	for _, c := range verbCases {
		names = append(names, c.verb, c.ability)
	}
	for _, name := range names {
		verb, known := VerbOf(name)
		for _, r := range Reversibilities {
			if !known {
				verb = "update"
				if r == "irreversible" {
					verb = "delete"
				}
			}
			assert.Equal(t, CanonicalVerb(name, "", r), verb, "%q (known %v), %s", name, known, r)
		}
	}
}
