package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// transferEnvelope is a transfer in dev whose params are params (a JSON
// object's members).
func transferEnvelope(agent, session, params string) []byte {
	return fmt.Appendf(nil, `{"svc_version":"0.2",
		"agent":{"id":%q,"on_behalf_of":"human:alice","session_id":%q},
		"action":{"namespace":"bank","verb":"transfer","ability":"bank/transfer"},
		"target":{"kind":"account","ref":"acct-1","environment":"dev"},"params":{%s},"magnitude":{"count":1},
		"axes":{"reversibility":"reversible","blast_radius":"single","externality":"outbound"},
		"approval":{"present":false,"hold_id":null},"context":{},
		"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n","signature":"s"}}`, agent, session, params)
}

// decideBody parses and decides one envelope.
func (p *pipeline) decideBody(t *testing.T, body []byte) engine.Decision {
	t.Helper()
	env, err := envelope.ParseEnvelope(body)
	require.NoError(t, err)
	d, _ := p.engine.Decide(context.Background(), engine.Request{Envelope: env, Received: time.Now()})
	return d
}

func (p *pipeline) usage(t *testing.T, scope engine.Scope, id string) engine.Usage {
	t.Helper()
	u, err := p.budgets.Usage(context.Background(), scope, id, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	return u
}

// 64 concurrent transfers of 125 EUR in one session never exceed its money
// budget of 5000 EUR: exactly 40 are allowed, the rest held.
func TestConcurrentTransfersRespectTheMoneyBudget(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	var wg sync.WaitGroup
	verdicts := make([]engine.Decision, 64)
	for i := range verdicts {
		wg.Go(func() {
			verdicts[i] = p.decideBody(t, transferEnvelope("payer", "pay", `"amount": "125.00", "currency": "EUR"`))
		})
	}
	wg.Wait()
	count := map[string]int{}
	for _, d := range verdicts {
		count[d.Decision+" "+d.Rule]++
	}
	assert.Equal(t, map[string]int{
		"allow svc.policy/default_allow":                   40,
		"require_approval svc.policy/session_money_budget": 24,
	}, count)
	assert.Equal(t, engine.Amounts{"EUR": 5000_0000}, p.usage(t, engine.ScopeSession, "pay").Money)
}

// The money evasions are each held: the second of two 4000 transfers in
// one session, however the amount and currency are spelled, and an amount
// without a currency at once.
func TestMoneyEvasionsHeld(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second string
		rule          string
	}{
		{"currency omitted", `"amount": 4000, "currency": "EUR"`, `"amount": 4000`, "svc.policy/session_money_budget"},
		{"currency empty", `"amount": 4000, "currency": "EUR"`, `"amount": 4000, "currency": ""`, "svc.policy/session_money_budget"},
		{"currency blank", `"amount": 4000, "currency": "EUR"`, `"amount": 4000, "currency": " "`, "svc.policy/session_money_budget"},
		{"currency null", `"amount": 4000, "currency": "EUR"`, `"amount": 4000, "currency": null`, "svc.policy/session_money_budget"},
		{"mixed currencies", `"amount": 4000, "currency": "EUR"`, `"amount": 4000, "currency": "USD"`, "svc.policy/session_money_budget"},
		{"EUR vs eur", `"amount": 4000, "currency": "EUR"`, `"amount": 4000, "currency": "eur"`, "svc.policy/session_money_budget"},
		{"amount as a string", `"amount": 4000, "currency": "EUR"`, `"amount": "4000", "currency": "EUR"`, "svc.policy/session_money_budget"},
		{"amount omitted", `"amount": 4000, "currency": "EUR"`, `"currency": "EUR"`, "svc.policy/session_money_budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPipeline(t, realOPA(t), nil)
			first := p.decideBody(t, transferEnvelope("a", "s", tc.first))
			require.Equal(t, engine.Allow, first.Decision, first.Reason)
			second := p.decideBody(t, transferEnvelope("a", "s", tc.second))
			assert.Equal(t, engine.RequireApproval, second.Decision, second.Reason)
			assert.Equal(t, tc.rule, second.Rule)
		})
	}
}

// Six transfers of 4000 EUR in one session: the first is allowed, the
// others held (the reference's probe allowed all six).
func TestSixTransfersHeldAfterTheFirst(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	var rules []string
	for range 6 {
		rules = append(rules, p.decideBody(t, transferEnvelope("a", "six", `"amount": 4000, "currency": "EUR"`)).Rule)
	}
	assert.Equal(t, []string{"svc.policy/default_allow", "svc.policy/session_money_budget", "svc.policy/session_money_budget",
		"svc.policy/session_money_budget", "svc.policy/session_money_budget", "svc.policy/session_money_budget"}, rules)
}

// deleteEnvelope is a single delete in staging.
func deleteEnvelope(agent, principal, session string) []byte {
	return fmt.Appendf(nil, `{"svc_version":"0.2",
		"agent":{"id":%q,"on_behalf_of":%q,"session_id":%q},
		"action":{"namespace":"db","verb":"delete","ability":"db/delete_row"},
		"target":{"kind":"table","ref":"t","environment":"staging"},"params":{},"magnitude":{"count":1},
		"axes":{"reversibility":"recoverable","blast_radius":"single","externality":"internal"},
		"approval":{"present":false,"hold_id":null},"context":{},
		"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n","signature":"s"}}`, agent, principal, session)
}

// 30 single deletes of one agent, each under a fresh session id, are held
// at the agent's delete budget (20): rotating sessions resets nothing. The
// agent id is folded, so a change of case is the same agent.
func TestSessionRotationHeldByTheAgentBudget(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	count := map[string]int{}
	for i := range 30 {
		agent := "rotator"
		if i%2 == 1 {
			agent = "ROTATOR"
		}
		d := p.decideBody(t, deleteEnvelope(agent, "", fmt.Sprintf("fresh-%d", i)))
		count[d.Decision+" "+d.Rule]++
	}
	assert.Equal(t, map[string]int{
		"allow svc.policy/default_allow":                  20,
		"require_approval svc.policy/agent_delete_budget": 10,
	}, count)
	assert.Equal(t, int64(20), p.usage(t, engine.ScopeAgent, "rotator").Deletes)
}

// Agents that rotate both their id and their session but act for one
// principal are held at the principal's delete budget (40).
func TestAgentRotationHeldByThePrincipalBudget(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	count := map[string]int{}
	for i := range 45 {
		d := p.decideBody(t, deleteEnvelope(fmt.Sprintf("agent-%d", i), "human:alice", fmt.Sprintf("s-%d", i)))
		count[d.Decision+" "+d.Rule]++
	}
	assert.Equal(t, map[string]int{
		"allow svc.policy/default_allow":                      40,
		"require_approval svc.policy/principal_delete_budget": 5,
	}, count)
}

// Concurrent deletes of one agent across sessions never exceed the agent's
// budget: the agent's lock is held from its totals to the commit.
func TestConcurrentSessionsOfAnAgentRespectItsBudget(t *testing.T) {
	p := newPipeline(t, realOPA(t), nil)
	var wg sync.WaitGroup
	verdicts := make([]string, 32)
	for i := range verdicts {
		wg.Go(func() { verdicts[i] = p.decideBody(t, deleteEnvelope("swarm", "", fmt.Sprintf("s-%d", i))).Decision })
	}
	wg.Wait()
	count := map[string]int{}
	for _, v := range verdicts {
		count[v]++
	}
	assert.Equal(t, map[string]int{engine.Allow: 20, engine.RequireApproval: 12}, count)
}
