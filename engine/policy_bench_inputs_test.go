package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// TestPolicyBenchInputsAreTheEngines: the input documents scripts/bench-policy
// gives opa bench are the ones the engine builds for their envelopes, so the
// figures measure the real input shape.
func TestPolicyBenchInputsAreTheEngines(t *testing.T) {
	const rest = `"approval":{"present":false,"hold_id":null},"context":{},` +
		`"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n-1","signature":"stub"}}`
	agent := `{"svc_version":"0.2","agent":{"id":"agent-1","on_behalf_of":"human:alice","session_id":"s-1"},`
	envelopes := map[string]string{
		"read": agent + `"action":{"namespace":"db","verb":"read","ability":"db/get_rows"},` +
			`"target":{"kind":"table","ref":"orders","environment":"production"},"params":{},"magnitude":{"count":1},` +
			`"axes":{"reversibility":"reversible","blast_radius":"single","externality":"internal"},` + rest,
		"update": agent + `"action":{"namespace":"db","verb":"update","ability":"db/update_rows"},` +
			`"target":{"kind":"table","ref":"orders","environment":"production"},"params":{"x":1},"magnitude":{"count":1},` +
			`"axes":{"reversibility":"reversible","blast_radius":"single","externality":"internal"},` + rest,
		"delete": agent + `"action":{"namespace":"db","verb":"delete","ability":"db/delete_rows"},` +
			`"target":{"kind":"table","ref":"orders","environment":"production"},"params":{},"magnitude":{"count":1},` +
			`"axes":{"reversibility":"irreversible","blast_radius":"single","externality":"internal"},` + rest,
		"grant": agent + `"action":{"namespace":"iam","verb":"update","ability":"iam/grant_admin_role"},` +
			`"target":{"kind":"user","ref":"bob","environment":"production"},"params":{},"magnitude":{"count":1},` +
			`"axes":{"reversibility":"reversible","blast_radius":"single","externality":"internal"},` + rest,
		"transfer": agent + `"action":{"namespace":"bank","verb":"transfer","ability":"bank/transfer"},` +
			`"target":{"kind":"account","ref":"x","environment":"staging"},"params":{"amount":"4000","currency":"EUR"},` +
			`"magnitude":{"count":1},"axes":{"reversibility":"irreversible","blast_radius":"single","externality":"outbound"},` + rest,
	}
	files, err := filepath.Glob("../rego/testdata/bench/*.json")
	require.NoError(t, err)
	require.Len(t, files, len(envelopes))
	for name, raw := range envelopes {
		env, err := envelope.ParseEnvelope([]byte(raw))
		require.NoError(t, err, name)
		in, err := engine.PolicyInputOf(env, engine.Cumulative{WindowSeconds: 3600}, false)
		require.NoError(t, err, name)
		want, err := os.ReadFile(filepath.Join("..", "rego", "testdata", "bench", name+".json"))
		require.NoError(t, err, name)
		assert.JSONEq(t, string(want), string(in), name)
	}
}
