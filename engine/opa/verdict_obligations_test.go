package opa

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

func TestVerdictObligationsAndShadow(t *testing.T) {
	v, err := verdictOf(json.RawMessage(`{"decision":"allow","rule":"svc.policy/a","reason":"r","obligations":["notify","max_rate"],` +
		`"shadow":{"decision":"require_approval","rule":"svc.policy/b","reason":"s"}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"notify", "max_rate"}, v.Obligations, "unknown obligations pass: adapters refuse them")
	assert.Equal(t, &engine.Verdict{Decision: engine.RequireApproval, Rule: "svc.policy/b", Reason: "s"}, v.Shadow)
	assert.Equal(t, []string{"max_rate"}, engine.UnknownObligations(v.Obligations))

	v, err = verdictOf(json.RawMessage(`{"decision":"allow","rule":"svc.policy/a","reason":"r","obligations":null,"shadow":null}`))
	require.NoError(t, err)
	assert.Nil(t, v.Obligations)
	assert.Nil(t, v.Shadow)

	for _, doc := range []string{
		`{"decision":"allow","rule":"r","reason":"","obligations":"notify"}`,
		`{"decision":"allow","rule":"r","reason":"","obligations":[1]}`,
		`{"decision":"allow","rule":"r","reason":"","obligations":[""]}`,
		`{"decision":"allow","rule":"r","reason":"","obligations":["notify","notify"]}`,
		`{"decision":"allow","rule":"r","reason":"","obligations":[null]}`,
		`{"decision":"allow","rule":"r","reason":"","Obligations":[]}`,
		`{"decision":"allow","rule":"r","reason":"","shadow":{"decision":"maybe","rule":"r","reason":""}}`,
		`{"decision":"allow","rule":"r","reason":"","shadow":"deny"}`,
		`{"decision":"allow","rule":"r","reason":"","SHADOW":null}`,
		`{"decision":"allow","rule":"r","reason":"","shadow":{"decision":"deny","rule":"r","reason":"","shadow":{"decision":"deny","rule":"r","reason":""}}}`,
	} {
		_, err := verdictOf(json.RawMessage(doc))
		assert.Error(t, err, doc)
	}
}
