package engine

import (
	"time"

	"github.com/svc-dev/svc/engine/envelope"
)

func (e *Engine) decisionEvent(env *envelope.Envelope, req Request, out *outcome) DecisionEvent {
	now := e.deps.Now()
	latency := int64(0)
	if !req.Received.IsZero() {
		latency = now.Sub(req.Received).Milliseconds()
	}
	ev := DecisionEvent{
		TS: FormatTime(now), Event: EventDecision,
		Verdict: out.Decision.Decision, RuleID: out.Rule, Reason: out.Reason,
		Verb: env.Action.Verb, RawVerb: env.Action.RawVerb, Ability: env.Action.Ability,
		Axes: env.Axes, MagnitudeCount: env.Magnitude.Count,
		SessionID: env.Agent.SessionID, AgentID: env.Agent.ID, OnBehalfOf: env.Agent.OnBehalfOf,
		Environment: env.Target.Environment, RawEnvironment: env.Target.RawEnvironment,
		Mode: env.Mode, DecisionLatencyMS: latency, SvcVersion: e.cfg.Version, EpochMS: now.UnixMilli(),
		DecisionID: out.DecisionID, EnvelopeHash: out.EnvelopeHash,
		HoldID: out.HoldID, HoldReused: out.HoldReused, ParentDecisionID: out.ParentDecisionID,
		Traceparent: env.Traceparent(), Gate: req.Gate, Obligations: out.Obligations,
	}
	if out.policy != nil && out.policy.Shadow != nil {
		sh := out.policy.Shadow
		ev.ShadowVerdict, ev.ShadowRule, ev.ShadowReason = sh.Decision, sh.Rule, sh.Reason
	}
	return ev
}

// auditedDecision is the audit record of the decision ev.
func auditedDecision(ev DecisionEvent, out *outcome) AuditedDecision {
	rec := AuditedDecision{DecisionEvent: ev, PolicyInput: out.input}
	if p := out.policy; p != nil {
		rec.PolicyDecision, rec.PolicyRule = p.Decision, p.Rule
	}
	return rec
}

// HoldEventOf describes a hold for the audit log and webhooks.
func HoldEventOf(event string, h *Hold, now time.Time) HoldEvent {
	ev := HoldEvent{
		Event: event, TS: FormatTime(now), HoldID: h.ID, RuleID: h.Rule, Status: h.Status,
		ExpiresTS: FormatTime(h.ExpiresTS), DecisionID: h.DecisionID, EnvelopeHash: h.EnvelopeHash,
		DecidedBy: h.DecidedBy, DecidedByVerified: h.DecidedByVerified, Reason: h.ResolutionReason,
	}
	if h.DecidedTS != nil {
		ev.DecidedTS = FormatTime(*h.DecidedTS)
	}
	if env := h.Envelope; env != nil {
		ev.SessionID, ev.AgentID = env.Agent.SessionID, env.Agent.ID
		ev.Ability, ev.Environment = env.Action.Ability, env.Target.Environment
	}
	return ev
}

// holdRecords are the audit records of the hold transitions a decision
// caused (created, consumed), committed with the decision's own record.
func (e *Engine) holdRecords(out *outcome) []AuditRecord {
	var records []AuditRecord
	now := e.deps.Now()
	for _, h := range []*Hold{out.created, out.redeemed} {
		if h != nil {
			records = append(records, AuditRecord{Kind: EventHoldResolution, Body: HoldEventOf(EventHoldResolution, h, now)})
		}
	}
	return records
}

// publishHoldEvents announces a hold the decision created on the webhook
// feed.
func (e *Engine) publishHoldEvents(out *outcome) {
	if h := out.created; h != nil {
		now := e.deps.Now()
		ev := HoldEventOf(EventHoldCreated, h, now)
		if e.cfg.HoldLink != nil {
			ev.URL = e.cfg.HoldLink(h.ID)
		}
		e.deps.Publisher.Publish(Event{Type: EventHoldCreated, Body: ev})
	}
}
