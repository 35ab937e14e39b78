package cmd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transfer is an outbound transfer in staging with the given params.
func transfer(session string, params map[string]any) map[string]any {
	return envelope(map[string]any{"agent.session_id": session, "agent.id": "payer-" + session,
		"agent.on_behalf_of": "human:" + session, "action.verb": "transfer", "action.ability": "bank/transfer",
		"axes.externality": "outbound", "params": params})
}

// The money budget (R5) end to end: six transfers of 4000 EUR in one
// session are allowed once, then held; the evasions are held; malformed
// amounts are refused naming the field.
func TestMoneyBudget(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	t.Run("six transfers", func(t *testing.T) {
		var rules []string
		for range 6 {
			r := p.decide(t, transfer("six", map[string]any{"amount": 4000, "currency": "EUR"}))
			require.Equal(t, 200, r.Status, "%v", r.Body)
			rules = append(rules, r.str("decision")+" "+r.str("rule"))
		}
		held := "require_approval svc.policy/session_money_budget"
		assert.Equal(t, []string{"allow svc.policy/default_allow", held, held, held, held, held}, rules)
		r := p.decide(t, transfer("six", map[string]any{"amount": 4000, "currency": "EUR"}))
		assert.Equal(t, "session money budget exceeded: 4000 prior + 4000 requested > limit 5000 EUR", r.str("reason"))
	})
	for i, second := range []map[string]any{
		{"amount": 4000},
		{"amount": 4000, "currency": ""},
		{"amount": 4000, "currency": " "},
		{"amount": 4000, "currency": nil},
		{"amount": 4000, "currency": "USD"},
		{"amount": 4000, "currency": "eur"},
		{"amount": "4000", "currency": "EUR"},
		{"currency": "EUR"},
	} {
		t.Run(fmt.Sprintf("evasion %v", second), func(t *testing.T) {
			session := fmt.Sprintf("evade-%d", i)
			first := p.decide(t, transfer(session, map[string]any{"amount": 4000, "currency": "EUR"}))
			require.Equal(t, "allow", first.str("decision"), "%v", first.Body)
			r := p.decide(t, transfer(session, second))
			assert.Equal(t, "require_approval", r.str("decision"), "%v", r.Body)
			assert.Equal(t, "svc.policy/session_money_budget", r.str("rule"))
		})
	}
	for _, amount := range []any{-1, "-1", "4e3", 4e300, "NaN", "Infinity", "1,000", 0.00001, true} {
		t.Run(fmt.Sprintf("refused %v", amount), func(t *testing.T) {
			r := p.decide(t, transfer("refused", map[string]any{"amount": amount, "currency": "EUR"}))
			assert.Equal(t, 400, r.Status)
			assert.Equal(t, "invalid_envelope", r.str("error"))
			assert.Equal(t, "params.amount", r.str("field"))
		})
	}
}

// Budgets that a new session id cannot reset, end to end: 30 single
// deletes of one agent, each under a fresh session id, are held at the
// agent's delete budget; agents rotated too are held at their principal's.
func TestRotationHeldByAgentAndPrincipalBudgets(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	del := func(agent, principal, session string) string {
		r := p.decide(t, envelope(map[string]any{"agent.id": agent, "agent.on_behalf_of": principal,
			"agent.session_id": session, "action.verb": "delete", "action.ability": "db/delete_row"}))
		require.Equal(t, 200, r.Status, "%v", r.Body)
		return r.str("decision") + " " + r.str("rule")
	}
	count := map[string]int{}
	for i := range 30 {
		count[del("rotator", "human:rot", fmt.Sprintf("fresh-%d", i))]++
	}
	assert.Equal(t, map[string]int{"allow svc.policy/default_allow": 20,
		"require_approval svc.policy/agent_delete_budget": 10}, count)

	count = map[string]int{}
	for i := range 45 {
		count[del(fmt.Sprintf("agent-%d", i), "human:bob", fmt.Sprintf("bob-%d", i))]++
	}
	assert.Equal(t, map[string]int{"allow svc.policy/default_allow": 40,
		"require_approval svc.policy/principal_delete_budget": 5}, count)
}

// The agent's and the principal's external-send and money budgets end to
// end (their delete budgets: TestRotationHeldByAgentAndPrincipalBudgets),
// with limits lowered in the pack's data: an agent rotating sessions, and a
// principal whose agents rotate too, are held by their own rule.
func TestAgentAndPrincipalSendAndMoneyBudgets(t *testing.T) {
	pack := packWith(t, func(svc map[string]any) {
		svc["agent_thresholds"].(map[string]any)["external_sends"] = 2
		svc["principal_thresholds"].(map[string]any)["external_sends"] = 3
		money := svc["money"].(map[string]any)
		money["agent"] = map[string]any{"default": 100, "currencies": map[string]any{}}
		money["principal"] = map[string]any{"default": 150, "currencies": map[string]any{}}
	})
	env := baseEnv(t)
	env["SVC_POLICY_DIR"] = pack
	p := startEngine(t, env)
	ask := func(agent, principal, session string, edits map[string]any) string {
		edits["agent.id"], edits["agent.on_behalf_of"], edits["agent.session_id"] = agent, principal, session
		r := p.decide(t, envelope(edits))
		require.Equal(t, 200, r.Status, "%v", r.Body)
		return r.str("decision") + " " + r.str("rule")
	}
	send := func() map[string]any {
		return map[string]any{"action.verb": "send", "action.ability": "mail/send", "axes.externality": "outbound"}
	}
	pay := func() map[string]any {
		return map[string]any{"action.verb": "transfer", "action.ability": "bank/transfer",
			"params": map[string]any{"amount": "60", "currency": "EUR"}}
	}
	allowed := "allow svc.policy/default_allow"
	var got []string
	for i := range 3 {
		got = append(got, ask("sender", "human:send-lead", fmt.Sprintf("send-%d", i), send()))
	}
	assert.Equal(t, []string{allowed, allowed, "require_approval svc.policy/agent_cumulative_budget"}, got)
	got = nil
	for i := range 4 {
		got = append(got, ask(fmt.Sprintf("sender-%d", i), "human:send-boss", fmt.Sprintf("boss-%d", i), send()))
	}
	assert.Equal(t, []string{allowed, allowed, allowed, "require_approval svc.policy/principal_cumulative_budget"}, got)
	got = nil
	for i := range 2 {
		got = append(got, ask("payer", "human:pay-lead", fmt.Sprintf("pay-%d", i), pay()))
	}
	assert.Equal(t, []string{allowed, "require_approval svc.policy/agent_money_budget"}, got)
	got = nil
	for i := range 3 {
		got = append(got, ask(fmt.Sprintf("payer-%d", i), "human:pay-boss", fmt.Sprintf("boss-pay-%d", i), pay()))
	}
	assert.Equal(t, []string{allowed, allowed, "require_approval svc.policy/principal_money_budget"}, got)
}

// packWith is a copy of the bundled pack whose data.svc is edited by edit.
func packWith(t *testing.T, edit func(svc map[string]any)) string {
	t.Helper()
	dir := bundledPackDir(t)
	path := filepath.Join(dir, "data.json")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	var data map[string]map[string]any
	require.NoError(t, json.Unmarshal(body, &data))
	edit(data["svc"])
	require.NoError(t, os.WriteFile(path, mustJSON(t, data), 0o600))
	return dir
}

// sensitiveAction is an update whose verb and ability are given.
func sensitiveAction(session, verb, ability, environment string) map[string]any {
	return envelope(map[string]any{"agent.session_id": session, "action.verb": verb, "action.ability": ability,
		"target.environment": environment})
}

// The bundled sensitive-action tables end to end: held in production, on
// canonical words whatever the spelling, allowed elsewhere with their
// obligations.
func TestSensitiveActions(t *testing.T) {
	p := startEngine(t, baseEnv(t))
	for _, c := range []struct{ verb, ability, rule string }{
		{"update", "iam/grant_admin", "svc.policy/sensitive_privilege"},
		{"GrantAdminRole", "iam/roles", "svc.policy/sensitive_privilege"},
		{"update", "iam/grant_\u0430dmin", "svc.policy/sensitive_privilege"}, // Cyrillic а
		{"disable", "auth/MFA", "svc.policy/sensitive_security_control"},
		{"update", "logging/disableCloudTrail", "svc.policy/sensitive_security_control"},
		{"set", "webhooks/endpoint", "svc.policy/sensitive_credential"},
		{"install", "wp/plugin", "svc.policy/sensitive_install"},
		{"transfer", "bank/transfer", "svc.policy/sensitive_payment"},
	} {
		t.Run(c.verb+" "+c.ability, func(t *testing.T) {
			env := sensitiveAction("sens", c.verb, c.ability, "production")
			env["params"] = map[string]any{"amount": 1, "currency": "EUR"}
			r := p.decide(t, env)
			require.Equal(t, 200, r.Status, "%v", r.Body)
			assert.Equal(t, "require_approval", r.str("decision"), "%v", r.Body)
			assert.Equal(t, c.rule, r.str("rule"))
		})
	}
	r := p.decide(t, sensitiveAction("sens-staging", "update", "iam/grant_admin", "staging"))
	assert.Equal(t, "allow", r.str("decision"))
	assert.Equal(t, []any{"log_params", "notify"}, r.Body["obligations"])
	r = p.decide(t, sensitiveAction("sens-read", "read", "iam/list_admin_roles", "production"))
	assert.Equal(t, "svc.policy/read_only_internal", r.str("rule"), "reads are never sensitive")
}

// svc decide, an adapter svc ships, honours the documented obligations
// (printed, exit 0) and refuses an action whose obligations it does not
// understand (exit 1, fail closed).
func TestSvcDecideRefusesUnknownObligations(t *testing.T) {
	pack := packWith(t, func(svc map[string]any) {
		svc["sensitive"].(map[string]any)["credential"].(map[string]any)["obligations"] = []string{"notify", "max_rate"}
	})
	env := baseEnv(t)
	env["SVC_POLICY_DIR"] = pack
	p := startEngine(t, env)
	cli := map[string]string{"SVC_CORE_URL": p.URL}

	known := runSvc(t, cli, bytes.NewReader(mustJSON(t, sensitiveAction("o-1", "update", "iam/grant_admin", "staging"))), "decide")
	assert.Equal(t, 0, known.code, known.output())
	assert.Contains(t, known.stdout, `"log_params"`)

	unknown := runSvc(t, cli, bytes.NewReader(mustJSON(t, sensitiveAction("o-2", "set", "webhooks/endpoint", "staging"))), "decide")
	assert.Equal(t, 1, unknown.code, unknown.output())
	assert.Contains(t, unknown.stdout, `"max_rate"`, "the decision is printed")
	assert.Contains(t, unknown.stderr, "obligations svc decide does not understand: max_rate")
}

// A rule marked observe is recorded (audit, shadow fields) and not
// enforced.
func TestObservedRuleRecordedNotEnforced(t *testing.T) {
	pack := packWith(t, func(svc map[string]any) { svc["observe"] = []string{"svc.policy/sensitive_privilege"} })
	env := baseEnv(t)
	env["SVC_POLICY_DIR"] = pack
	p := startEngine(t, env)
	r := p.decide(t, sensitiveAction("shadow", "update", "iam/grant_admin", "production"))
	require.Equal(t, 200, r.Status, "%v", r.Body)
	assert.Equal(t, "allow", r.str("decision"), "observed: not enforced")
	var rec map[string]any
	for _, line := range auditLines(t, env["SVC_AUDIT_LOG"]) {
		if line["decision_id"] == r.str("decision_id") && line["event"] == "decision" {
			rec = line
		}
	}
	require.NotNil(t, rec, "the decision is audited")
	assert.Equal(t, "require_approval", rec["shadow_verdict"])
	assert.Equal(t, "svc.policy/sensitive_privilege", rec["shadow_rule"])
	assert.Contains(t, rec["shadow_reason"], "privilege or role change")
	assert.Equal(t, "allow", rec["policy_decision"])
	assert.NotNil(t, rec["policy_input"])
}
