package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine/envelope"
)

// redeem spends an approved hold on a re-submission. The hold must exist,
// be bound to the same envelope hash, parameters, actor and gate, and be approved
// and unexpired; when the policy holds the re-submission, the hold's
// approver must be one that may approve the rule holding it; consumption is one compare-and-set, made by the commit of
// the decision (settle handles losing it). A refused re-submission never
// consumes the hold.
func (e *Engine) redeem(ctx context.Context, req Request, out *outcome, now time.Time) error {
	env := req.Envelope
	id := env.Approval.HoldID
	if id == "" {
		e.refuse(out, ReasonHoldNotFound, "approval.present is true but approval.hold_id is missing")
		return nil
	}
	h, err := e.deps.Holds.Get(ctx, id, now)
	if errors.Is(err, ErrNotFound) {
		e.refuse(out, ReasonHoldNotFound, "no hold "+id)
		return nil
	}
	if err != nil {
		return internalFault("hold store unavailable", err)
	}
	if code, why := e.binding(req, out, &h); code != "" {
		e.refuse(out, code, why)
		return nil
	}
	if code, why := statusRefusal(h.Status); code != "" {
		e.refuse(out, code, why)
		return nil
	}
	if code, why := e.approverMay(out.policy, &h); code != "" {
		e.refuse(out, code, why)
		return nil
	}
	consumed := h
	consumed.Status, consumed.ConsumedTS, consumed.ConsumedBy = HoldConsumed, &now, out.DecisionID
	out.Decision.Decision, out.Rule = Allow, RuleApprovedResubmission
	out.Reason = "hold " + id + " was approved; this re-submission redeems it (single use)"
	out.HoldID, out.ParentDecisionID, out.redeemed = id, h.DecisionID, &consumed
	e.charge(env, out, now)
	return nil
}

// binding checks that the re-submission is the action the hold was raised
// for, with the same parameters, by the same actor, through the same gate:
// a portal-issued credential of one gate cannot spend the approvals of
// another, nor SVC_AUTH_TOKEN those raised through a gate, or the reverse.
// A hold raised before svc recorded gates (Gate nil) is bound to none.
func (e *Engine) binding(req Request, out *outcome, h *Hold) (string, string) {
	env := req.Envelope
	paramsHash, err := env.ParamsHash()
	switch {
	case h.EnvelopeHash != out.EnvelopeHash:
		return ReasonHoldEnvelopeMismatch, "the action, target, magnitude or axes differ from the held envelope"
	case err != nil || h.ParamsHash != paramsHash:
		return ReasonHoldEnvelopeMismatch, "the parameters differ from the held envelope"
	case h.Envelope == nil ||
		envelope.BoundEnvironment(h.Envelope.Target.RawEnvironment) != envelope.BoundEnvironment(env.Target.RawEnvironment):
		return ReasonHoldEnvelopeMismatch, "the environment differs from the held envelope's (" +
			h.Envelope.Target.RawEnvironment + " was held)"
	case h.Envelope == nil || envelope.Fold(h.Envelope.Agent.ID) != envelope.Fold(env.Agent.ID) ||
		envelope.Fold(h.Envelope.Agent.OnBehalfOf) != envelope.Fold(env.Agent.OnBehalfOf):
		return ReasonHoldActorMismatch, "the hold was raised for another agent or principal"
	case h.Gate != nil && *h.Gate != req.Gate:
		return ReasonHoldActorMismatch, "the hold was raised through another gate"
	}
	return "", ""
}

// HoldBinding is the key of what a hold is bound to, under which a
// require_approval reuses it (Holds.Reusable): sha256 hex of the envelope
// hash, the params hash, the folded agent.id and agent.on_behalf_of, the
// gate and, when it is not a spelling of a canonical environment, the
// environment as named (envelope.BoundEnvironment) — the values a
// re-submission must match to redeem it (binding) — and, when they are
// not the default ones, the approver types of its rule (Hold.Approvers),
// so that an action held under a rule with other approvers raises a hold
// they can approve rather than find one approved by a type they exclude.
// The last two are appended only when present, so that holds stored
// before they were bound keep their key. A hold without envelope, or raised before svc recorded gates, has
// none (""), and is never reused.
func HoldBinding(h *Hold) string {
	if h.Envelope == nil || h.Gate == nil {
		return ""
	}
	a := h.Envelope.Agent
	fields := []string{h.EnvelopeHash, h.ParamsHash, envelope.Fold(a.ID), envelope.Fold(a.OnBehalfOf), *h.Gate}
	if bound := envelope.BoundEnvironment(h.Envelope.Target.RawEnvironment); bound != h.Envelope.Target.Environment {
		fields = append(fields, bound)
	}
	if h.Approvers != "" {
		fields = append(fields, "approvers:"+h.Approvers)
	}
	key, _ := json.Marshal(fields) // strings always marshal
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])
}

// approverMay refuses a re-submission that the policy (v) holds, when h's
// approver is of a type that SVC_RESOLUTION_POLICY does not let approve
// the rule holding it now: who may approve depends on the rule, budgets
// shift which rule holds an action between its hold and its
// re-submission, and an approval given before the policy was tightened no
// longer counts.
func (e *Engine) approverMay(v *Verdict, h *Hold) (string, string) {
	if v == nil || v.Decision != RequireApproval || e.cfg.Approvers == nil {
		return "", ""
	}
	if h.DecidedBy == nil || !slices.Contains(e.cfg.Approvers(v.Rule), h.DecidedBy.Type) {
		who := "an unrecorded approver"
		if h.DecidedBy != nil {
			who = "a principal of type " + h.DecidedBy.Type
		}
		return ReasonHoldRuleMismatch, "the hold was approved under " + h.Rule + " by " + who +
			"; this re-submission is held by " + v.Rule + ", which SVC_RESOLUTION_POLICY does not let that type approve:" +
			" it needs the approval of a type that rule allows"
	}
	return "", ""
}

// approversOf is the Approvers of a hold of rule: its approver types,
// sorted, each once, and joined ("none" for no type), when they differ from
// the default ones; "" when they do not, or when any type may approve any
// rule.
func (e *Engine) approversOf(rule string) string {
	if e.cfg.Approvers == nil {
		return ""
	}
	set := func(types []string) []string { return slices.Compact(slices.Sorted(slices.Values(types))) }
	own := set(e.cfg.Approvers(rule))
	switch {
	case slices.Equal(own, set(e.cfg.Approvers(""))):
		return ""
	case len(own) == 0:
		return "none"
	}
	return strings.Join(own, ",")
}

func statusRefusal(status string) (string, string) {
	switch status {
	case HoldApproved:
		return "", ""
	case HoldExpired:
		return ReasonHoldExpired, "the hold expired before it was redeemed"
	case HoldConsumed:
		return ReasonHoldConsumed, "the hold was already redeemed"
	}
	return ReasonHoldNotApproved, "the hold is " + status + ", not approved"
}

// lostRace reports why the consumption found the hold no longer redeemable (another
// re-submission consumed it first, or it lapsed meanwhile).
func (e *Engine) lostRace(ctx context.Context, out *outcome, id string, now time.Time) error {
	h, err := e.deps.Holds.Get(ctx, id, now)
	if err != nil {
		return internalFault("hold store unavailable", err)
	}
	code, why := statusRefusal(h.Status)
	if code == "" {
		code, why = ReasonHoldConsumed, "the hold was redeemed by a concurrent re-submission"
	}
	e.refuse(out, code, why)
	return nil
}

// refuse denies a re-submission; reason is the machine-readable code and
// detail the explanation, so adapters can match on reason alone.
func (e *Engine) refuse(out *outcome, code, detail string) {
	out.Decision.Decision, out.Rule, out.Reason = Deny, RuleHoldNotRedeemable, code
	out.Detail = detail
}
