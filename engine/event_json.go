package engine

import "strconv"

// AppendJSON appends d as json.Marshal writes it, without its reflection:
// the audit log writes one per decision. PolicyInput is appended as it is
// (it is PolicyInputOf's output, already as json.Marshal writes it, which
// json.Marshal would scan and copy once more). ledger's TestMarshalRecord
// checks the bytes against json.Marshal's.
func (d AuditedDecision) AppendJSON(b []byte) []byte {
	ev := &d.DecisionEvent
	b = appendJSONString(append(b, `{"ts":`...), ev.TS)
	b = appendJSONString(append(b, `,"event":`...), ev.Event)
	b = appendJSONString(append(b, `,"verdict":`...), ev.Verdict)
	b = appendJSONString(append(b, `,"rule_id":`...), ev.RuleID)
	b = appendJSONString(append(b, `,"verb":`...), ev.Verb)
	b = appendOptString(b, `,"raw_verb":`, ev.RawVerb)
	b = appendJSONString(append(b, `,"ability":`...), ev.Ability)
	b = appendJSONString(append(b, `,"axes":{"reversibility":`...), ev.Axes.Reversibility)
	b = appendJSONString(append(b, `,"blast_radius":`...), ev.Axes.BlastRadius)
	b = appendJSONString(append(b, `,"externality":`...), ev.Axes.Externality)
	b = strconv.AppendInt(append(b, `},"magnitude_count":`...), ev.MagnitudeCount, 10)
	b = appendJSONString(append(b, `,"session_id":`...), ev.SessionID)
	b = appendJSONString(append(b, `,"agent_id":`...), ev.AgentID)
	b = appendJSONString(append(b, `,"on_behalf_of":`...), ev.OnBehalfOf)
	b = appendJSONString(append(b, `,"environment":`...), ev.Environment)
	b = appendOptString(b, `,"raw_environment":`, ev.RawEnvironment)
	b = appendJSONString(append(b, `,"mode":`...), ev.Mode)
	b = strconv.AppendInt(append(b, `,"decision_latency_ms":`...), ev.DecisionLatencyMS, 10)
	b = appendJSONString(append(b, `,"reason":`...), ev.Reason)
	b = appendJSONString(append(b, `,"svc_version":`...), ev.SvcVersion)
	b = strconv.AppendInt(append(b, `,"epoch_ms":`...), ev.EpochMS, 10)
	b = appendJSONString(append(b, `,"decision_id":`...), ev.DecisionID)
	b = appendJSONString(append(b, `,"envelope_hash":`...), ev.EnvelopeHash)
	b = appendOptString(b, `,"hold_id":`, ev.HoldID)
	if ev.HoldReused {
		b = append(b, `,"hold_reused":true`...)
	}
	b = appendOptString(b, `,"parent_decision_id":`, ev.ParentDecisionID)
	b = appendOptString(b, `,"traceparent":`, ev.Traceparent)
	b = appendOptString(b, `,"gate":`, ev.Gate)
	if len(ev.Obligations) > 0 {
		b = append(b, `,"obligations":[`...)
		for i, o := range ev.Obligations {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, o)
		}
		b = append(b, ']')
	}
	b = appendOptString(b, `,"shadow_verdict":`, ev.ShadowVerdict)
	b = appendOptString(b, `,"shadow_rule":`, ev.ShadowRule)
	b = appendOptString(b, `,"shadow_reason":`, ev.ShadowReason)
	b = appendOptString(b, `,"policy_decision":`, d.PolicyDecision)
	b = appendOptString(b, `,"policy_rule":`, d.PolicyRule)
	if len(d.PolicyInput) > 0 {
		b = append(append(b, `,"policy_input":`...), d.PolicyInput...)
	}
	return append(b, '}')
}

// appendOptString appends member and s, unless s is empty (omitempty).
func appendOptString(b []byte, member, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, member...), s)
}
