package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// ruleEvaluator holds every action under the rule it is set to.
type ruleEvaluator struct{ rule atomic.Value }

func (r *ruleEvaluator) Evaluate(context.Context, json.RawMessage) (engine.Verdict, error) {
	return engine.Verdict{Decision: engine.RequireApproval, Rule: r.rule.Load().(string), Reason: "held",
		Obligations: []string{}}, nil
}

// decideHeld decides an irreversible broad delete in environment, with an
// approval of hold when it is not "".
func (p *pipeline) decideHeld(t *testing.T, environment, hold string) engine.Decision {
	t.Helper()
	approval := `{"present":false,"hold_id":null}`
	if hold != "" {
		approval = fmt.Sprintf(`{"present":true,"hold_id":%q}`, hold)
	}
	env, err := envelope.ParseEnvelope(fmt.Appendf(nil, `{"svc_version":"0.2",
		"agent":{"id":"agent-1","on_behalf_of":"human:alice","session_id":"s"},
		"action":{"namespace":"db","verb":"delete","ability":"db/x"},
		"target":{"kind":"table","ref":"t","environment":%q},"params":{},"magnitude":{"count":1},
		"axes":{"reversibility":"irreversible","blast_radius":"broad","externality":"internal"},
		"approval":%s,"context":{},"meta":{"timestamp":"2026-01-01T00:00:00Z","nonce":"n","signature":"s"}}`,
		environment, approval))
	require.NoError(t, err)
	d, _ := p.engine.Decide(context.Background(), engine.Request{Envelope: env, Received: time.Now()})
	return d
}

// An approval is bound to the rule that held the action: who may approve
// depends on the rule (SVC_RESOLUTION_POLICY), so the same action held by
// another rule neither reuses the hold nor redeems its approval.
func TestHoldIsBoundToItsRule(t *testing.T) {
	ev := &ruleEvaluator{}
	ev.rule.Store("svc.policy/session_delete_budget")
	p := newPipelineWith(t, ev, nil)
	first := p.decideHeld(t, "production", "")
	require.Equal(t, engine.RequireApproval, first.Decision)
	p.approve(t, first.HoldID)

	ev.rule.Store("svc.policy/agent_delete_budget")
	other := p.decideHeld(t, "production", "")
	assert.NotEqual(t, first.HoldID, other.HoldID, "another rule raises its own hold")
	assert.False(t, other.HoldReused)
	refused := p.decideHeld(t, "production", first.HoldID)
	assert.Equal(t, engine.Deny, refused.Decision)
	assert.Equal(t, engine.ReasonHoldRuleMismatch, refused.Reason)

	ev.rule.Store("svc.policy/session_delete_budget")
	again := p.decideHeld(t, "production", "")
	assert.Equal(t, first.HoldID, again.HoldID, "the same rule reuses the approved hold")
	redeemed := p.decideHeld(t, "production", first.HoldID)
	assert.Equal(t, engine.Allow, redeemed.Decision, "%+v", redeemed)
}

// An approval is bound to the environment as named: "prod-eu" and "qa"
// both read as production, yet an approval in one is not one in the
// other; spellings of one environment ("PRD", "production") share it.
func TestHoldIsBoundToTheEnvironmentAsNamed(t *testing.T) {
	ev := &ruleEvaluator{}
	ev.rule.Store("svc.policy/irreversible_broad_prod")
	p := newPipelineWith(t, ev, nil)
	eu := p.decideHeld(t, "prod-eu", "")
	require.Equal(t, engine.RequireApproval, eu.Decision)
	p.approve(t, eu.HoldID)

	us := p.decideHeld(t, "prod-us", "")
	assert.NotEqual(t, eu.HoldID, us.HoldID, "another unrecognised environment raises its own hold")
	qa := p.decideHeld(t, "qa", eu.HoldID)
	assert.Equal(t, engine.Deny, qa.Decision)
	assert.Equal(t, engine.ReasonHoldEnvelopeMismatch, qa.Reason)
	assert.Contains(t, qa.Detail, "prod-eu")
	assert.Equal(t, engine.Allow, p.decideHeld(t, "PROD-EU", eu.HoldID).Decision, "the same name in another case")

	prd := p.decideHeld(t, "PRD", "")
	p.approve(t, prd.HoldID)
	assert.Equal(t, prd.HoldID, p.decideHeld(t, "production", "").HoldID, "spellings of production share a hold")
	assert.Equal(t, engine.Allow, p.decideHeld(t, "prod", prd.HoldID).Decision)
}
