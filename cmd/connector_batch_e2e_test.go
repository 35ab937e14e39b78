package cmd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batchBody is a batch request (gateway-batch-contract.md) of the billing
// tenant with the two calls of fixture 03.
func batchBody(t testing.TB) map[string]any {
	f := fixture(t, "03_post_call_two_tool_calls_allow_and_deny.json")
	return map[string]any{
		"model":        "gpt-4o-2024-08-06",
		"request_data": f["request_data"],
		"session_hints": map[string]any{"svc_session": nil, "header": "[present]", "trace_id": "trace-9",
			"call_id": "call-9"},
		"deployment":        map[string]any{"api_base_host": "api.openai.com", "deployment_id": "model-1", "provider": "openai"},
		"hold_wait_seconds": 0,
		"tool_calls":        f["tool_calls"],
	}
}

// TestConnectorBatchRoute: the in-process module's route answers one
// outcome per call, in order, with the refusal payload, and records the
// rows with transport in_process and the deployment.
func TestConnectorBatchRoute(t *testing.T) {
	g := startGateway(t, nil)
	u := g.conn.URL + "/v1/gateway/tool-calls"
	r := postKey(t, u, connectorToken, batchBody(t))
	require.Equal(t, 200, r.Status, "%v", r.Body)
	outcomes := r.Body["outcomes"].([]any)
	require.Len(t, outcomes, 2)
	first, second := outcomes[0].(map[string]any), outcomes[1].(map[string]any)
	assert.Equal(t, "allow", first["outcome"])
	assert.Nil(t, first["refusal"])
	assert.Equal(t, true, first["enforced"])
	assert.NotEmpty(t, first["decision_id"])
	assert.Equal(t, "hold_timeout", second["outcome"])
	assert.Equal(t, "billing_void_invoices", second["tool"])
	refusal := second["refusal"].(map[string]any)
	assert.Equal(t, "svc_hold_timeout", refusal["error"])
	assert.Equal(t, second["hold_id"], refusal["hold_id"])
	payload := r.Body["refusal_payload"].(map[string]any)["svc"].(map[string]any)
	assert.Equal(t, float64(1), payload["version"])
	assert.Len(t, payload["refused"], 1)

	rows := g.ledgerRows(t)
	require.Len(t, rows, 2)
	for _, row := range rows {
		assert.Equal(t, "in_process", row["transport"])
		assert.Equal(t, "api.openai.com", row["api_base_host"])
		assert.Equal(t, "model-1", row["deployment_id"])
		assert.Equal(t, "openai", row["provider"])
		assert.Equal(t, "gateway:acme-billing:customer-ops-run-20261104-0117", row["session"], "[present] is discarded")
	}

	for field, edit := range map[string]func(b map[string]any){
		"extra":             func(b map[string]any) { b["extra"] = 1 },
		"tool_calls":        func(b map[string]any) { delete(b, "tool_calls") },
		"hold_wait_seconds": func(b map[string]any) { b["hold_wait_seconds"] = -1 },
		"deployment.region": func(b map[string]any) { b["deployment"] = map[string]any{"region": "eu"} },
		"tool_calls[0].function.name": func(b map[string]any) {
			b["tool_calls"] = []any{map[string]any{"id": "c", "function": map[string]any{"arguments": "{}"}}}
		},
	} {
		b := batchBody(t)
		edit(b)
		bad := postKey(t, u, connectorToken, b)
		require.Equal(t, 400, bad.Status, field)
		require.Equal(t, "invalid_request", bad.str("error"), field)
		require.Equal(t, field, bad.str("field"))
	}
	dup := postKey(t, u, connectorToken, []byte(`{"tool_calls": [], "tool_calls": [{"function": {"name": "rm"}}]}`))
	require.Equal(t, 400, dup.Status)
	require.Equal(t, "tool_calls", dup.str("field"))

	b := batchBody(t)
	b["request_data"] = map[string]any{"user_api_key_hash": "2c2943a79221f3ae8ad2f788cf8403b9944b06da0bd7a21bcda911de25ead0cc"}
	before := g.decides.Load()
	un := postKey(t, u, connectorToken, b)
	require.Equal(t, 200, un.Status)
	for _, o := range un.Body["outcomes"].([]any) {
		require.Equal(t, "unmapped", o.(map[string]any)["outcome"])
	}
	require.Equal(t, before, g.decides.Load(), "an unmapped caller never reaches the engine")
}

// TestConnectorBatchObserve: in observe mode outcomes say what enforce
// would do and carry enforced false.
func TestConnectorBatchObserve(t *testing.T) {
	g := startGateway(t, map[string]string{"SVC_MODE": "observe"})
	r := postKey(t, g.conn.URL+"/v1/gateway/tool-calls", connectorToken, batchBody(t))
	require.Equal(t, 200, r.Status)
	second := r.Body["outcomes"].([]any)[1].(map[string]any)
	require.Equal(t, "hold_timeout", second["outcome"])
	require.Equal(t, false, second["enforced"])
	require.NotNil(t, r.Body["refusal_payload"])
}
