package cmd_test

import (
	"fmt"
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
