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

// approveAs approves hold id as principal by does.
func (p *pipeline) approveAs(t *testing.T, id string, by engine.Principal) {
	t.Helper()
	rec := engine.HoldEvent{Event: engine.EventHoldResolution, HoldID: id, Status: engine.HoldApproved}
	require.NoError(t, p.audit.Commit(context.Background(), engine.Entry{
		Records: []engine.AuditRecord{{Kind: engine.EventHoldResolution, Body: rec}},
		Resolve: &engine.HoldResolution{HoldID: id, Status: engine.HoldApproved, By: by, Verified: true, At: time.Now()},
	}))
}

// Who may approve depends on the rule (SVC_RESOLUTION_POLICY), and budgets
// shift which rule holds an action between its hold and its re-submission:
// a re-submission held under another rule redeems when the hold's approver
// may approve that rule too, and is refused svc_hold_rule_mismatch when
// not. A hold is reused by an action held under another rule with the same
// approvers; under one with other approvers the action raises a hold of
// its own, which they can approve.
func TestRedemptionUnderAnotherRuleNeedsAnApproverOfThatRule(t *testing.T) {
	ev := &ruleEvaluator{}
	approvers := func(rule string) []string {
		switch rule {
		case "svc.policy/session_delete_budget":
			return []string{"human", "automation"}
		case "svc.policy/irreversible_broad_prod":
			return []string{"human"}
		}
		return []string{"human"} // the default
	}
	p := newPipelineConfig(t, engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour, Approvers: approvers}, ev, nil)
	ev.rule.Store("svc.policy/session_delete_budget")
	held := p.decideHeld(t, "production", "")
	require.Equal(t, engine.RequireApproval, held.Decision)
	p.approveAs(t, held.HoldID, engine.Principal{Type: "automation", ID: "change-bot"})

	ev.rule.Store("svc.policy/agent_delete_budget") // human only
	refused := p.decideHeld(t, "production", held.HoldID)
	assert.Equal(t, engine.Deny, refused.Decision)
	assert.Equal(t, engine.ReasonHoldRuleMismatch, refused.Reason)
	assert.Contains(t, refused.Detail, "automation")
	own := p.decideHeld(t, "production", "")
	require.Equal(t, engine.RequireApproval, own.Decision)
	assert.NotEqual(t, held.HoldID, own.HoldID, "other approvers: a hold of its own, not the automation's approval")
	p.approveAs(t, own.HoldID, engine.Principal{Type: "human", ID: "alice"})
	assert.Equal(t, engine.Allow, p.decideHeld(t, "production", own.HoldID).Decision)

	ev.rule.Store("svc.policy/session_delete_budget")
	assert.Equal(t, engine.Allow, p.decideHeld(t, "production", held.HoldID).Decision, "under its own rule it redeems")

	ev.rule.Store("svc.policy/irreversible_broad_prod")
	human := p.decideHeld(t, "production", "")
	ev.rule.Store("svc.policy/agent_delete_budget")
	assert.Equal(t, human.HoldID, p.decideHeld(t, "production", "").HoldID, "the same approvers: the hold is reused")
	p.approveAs(t, human.HoldID, engine.Principal{Type: "human", ID: "alice"})
	redeemed := p.decideHeld(t, "production", human.HoldID)
	assert.Equal(t, engine.Allow, redeemed.Decision, "a human may approve either rule: %+v", redeemed)
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

// A rule nobody may approve has approvers of its own ("none"), not the
// default ones: an action held under it does not reuse a hold of a rule
// humans may approve, nor the reverse. An approval given before
// SVC_RESOLUTION_POLICY was tightened no longer counts, under its own rule
// too.
func TestApproversOfARuleNobodyMayApprove(t *testing.T) {
	ev := &ruleEvaluator{}
	policy := map[string][]string{"svc.policy/session_delete_budget": {}, "svc.policy/open": {"human", "automation", "human"}}
	approvers := func(rule string) []string {
		if types, ok := policy[rule]; ok {
			return types
		}
		return []string{"human"}
	}
	p := newPipelineConfig(t, engine.Config{Version: "test", Window: time.Hour, HoldTTL: time.Hour, Approvers: approvers}, ev, nil)
	ev.rule.Store("svc.policy/session_delete_budget")
	nobody := p.decideHeld(t, "production", "")
	ev.rule.Store("svc.policy/agent_delete_budget")
	human := p.decideHeld(t, "production", "")
	assert.NotEqual(t, nobody.HoldID, human.HoldID, "no approver is not the default approvers")

	ev.rule.Store("svc.policy/open")
	open := p.decideHeld(t, "dev", "")
	p.approveAs(t, open.HoldID, engine.Principal{Type: "automation", ID: "bot"})
	policy["svc.policy/open"] = []string{"human"} // tightened (a restart with another policy)
	refused := p.decideHeld(t, "dev", open.HoldID)
	assert.Equal(t, engine.ReasonHoldRuleMismatch, refused.Reason, "%+v", refused)
}
