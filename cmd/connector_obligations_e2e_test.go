package cmd_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// obligationsGateway is an engine whose credential table carries notify
// and max_rate, an obligation outside the closed set, and a connector in
// front of it.
func obligationsGateway(t *testing.T) *gateway {
	t.Helper()
	pack := packWith(t, func(svc map[string]any) {
		svc["sensitive"].(map[string]any)["credential"].(map[string]any)["obligations"] = []string{"notify", "max_rate"}
	})
	engine, engineEnv := holdsEngine(t, map[string]string{"SVC_OPA_MODE": "server", "SVC_POLICY_DIR": pack})
	env := connectorEnv(t, engine.URL)
	return &gateway{engine: engine, engineEnv: engineEnv, conn: startConnector(t, env), env: env}
}

// labCalls are two tool calls of the lab tenant (staging, where the
// sensitive tables allow): a role grant, allowed with log_params and
// notify, and a webhook endpoint change, allowed with max_rate.
func labCalls() []any {
	return []any{
		map[string]any{"id": "call_grant", "type": "function", "function": map[string]any{"name": "grant_admin_role",
			"arguments": `{"user": "bob", "role": "admin"}`}},
		map[string]any{"id": "call_hook", "type": "function", "function": map[string]any{"name": "set_webhook_endpoint",
			"arguments": `{"url": "https://hooks.example.com/x"}`}},
	}
}

// An unknown obligation is refused by the connector on path 1 (the
// guardrail route: BLOCKED with the refusal payload) and on path 2's route
// (the batch route the in-process module calls: that call fail_closed),
// while the documented ones are honoured: log_params records the params in
// the ledger row, notify logs a notice naming the principal.
func TestConnectorObligations(t *testing.T) {
	g := obligationsGateway(t)
	calls := labCalls()
	body := fixture(t, "01_post_call_single_read_tool_call.json")
	body["request_data"] = map[string]any{"user_api_key_alias": "agent-lab"}

	body["tool_calls"] = calls[:1]
	r := g.guardrail(t, body)
	require.Equal(t, "NONE", r.str("action"), "%v", r.Body)
	rows := g.ledgerRows(t)
	require.Len(t, rows, 1)
	assert.Equal(t, "svc.policy/default_allow", rows[0]["rule"])
	assert.Equal(t, []any{"log_params", "notify"}, rows[0]["obligations"])
	assert.Equal(t, map[string]any{"user": "bob", "role": "admin"}, rows[0]["params"], "log_params: the params are on record")
	notices := noticesAfter(t, g, 1)
	assert.Equal(t, "human:lab-lead", notices[0]["principal"])
	assert.Equal(t, "grant_admin_role", notices[0]["tool"])

	body["tool_calls"] = calls
	refused := refusals(t, g.guardrail(t, body))
	require.Len(t, refused, 1)
	assert.Equal(t, "svc_fail_closed", refused[0]["error"])
	assert.Equal(t, "set_webhook_endpoint", refused[0]["tool"])
	assert.Contains(t, refused[0]["reason"], "obligations the connector does not understand: max_rate")
	assert.Len(t, noticesAfter(t, g, 1), 1, "a refused answer releases nothing: no notice")

	batch := batchBody(t)
	batch["request_data"] = map[string]any{"user_api_key_alias": "agent-lab"}
	batch["tool_calls"] = calls
	r = postKey(t, g.conn.URL+"/v1/gateway/tool-calls", connectorToken, batch)
	require.Equal(t, 200, r.Status, "%v", r.Body)
	outcomes := r.Body["outcomes"].([]any)
	require.Len(t, outcomes, 2)
	assert.Equal(t, "allow", outcomes[0].(map[string]any)["outcome"])
	hook := outcomes[1].(map[string]any)
	assert.Equal(t, "fail_closed", hook["outcome"])
	assert.Equal(t, "svc_fail_closed", hook["refusal"].(map[string]any)["error"])
	assert.Contains(t, hook["reason"], "max_rate")
	assert.Len(t, noticesAfter(t, g, 2), 2, "path 2 releases the allowed call beside the refused one: notified")
	rows = g.ledgerRows(t)
	assert.Equal(t, "fail_closed", rows[0]["outcome"])
	assert.Equal(t, "allow", rows[0]["verdict"], "the engine's allow stays on record")
	assert.Equal(t, []any{"max_rate", "notify"}, rows[0]["obligations"])
	assert.Nil(t, rows[0]["params"])
	raw, err := json.Marshal(rows)
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(raw), "hooks.example.com"), "params are recorded only under log_params")
}

// noticesAfter returns the connector's notify notices once its log, read
// from its output as it comes, holds want of them (or after 10 s), and
// after a further moment in which no more may arrive.
func noticesAfter(t *testing.T, g *gateway, want int) []map[string]any {
	t.Helper()
	const msg = "svc notify: a tool call under a notify obligation was released"
	deadline := time.Now().Add(10 * time.Second)
	for len(g.conn.logsWith(msg)) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return g.conn.logsWith(msg)
}
