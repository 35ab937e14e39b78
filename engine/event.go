package engine

import (
	"encoding/json"

	"github.com/svc-dev/svc/engine/envelope"
)

// DecisionEvent is the record of one decision: the audit line (kind
// "decision") and the body of the syslog decision event (spec §6.2). Optional
// fields are omitted when they do not apply.
type DecisionEvent struct {
	TS                string        `json:"ts"`
	Event             string        `json:"event"`
	Verdict           string        `json:"verdict"`
	RuleID            string        `json:"rule_id"`
	Verb              string        `json:"verb"`
	RawVerb           string        `json:"raw_verb,omitempty"`
	Ability           string        `json:"ability"`
	Axes              envelope.Axes `json:"axes"`
	MagnitudeCount    int64         `json:"magnitude_count"`
	SessionID         string        `json:"session_id"`
	AgentID           string        `json:"agent_id"`
	OnBehalfOf        string        `json:"on_behalf_of"`
	Environment       string        `json:"environment"`
	RawEnvironment    string        `json:"raw_environment,omitempty"`
	Mode              string        `json:"mode"`
	DecisionLatencyMS int64         `json:"decision_latency_ms"`
	Reason            string        `json:"reason"`
	SvcVersion        string        `json:"svc_version"`
	EpochMS           int64         `json:"epoch_ms"`
	DecisionID        string        `json:"decision_id"`
	EnvelopeHash      string        `json:"envelope_hash"`
	HoldID            string        `json:"hold_id,omitempty"`
	HoldReused        bool          `json:"hold_reused,omitempty"`
	ParentDecisionID  string        `json:"parent_decision_id,omitempty"`
	Traceparent       string        `json:"traceparent,omitempty"`
	Gate              string        `json:"gate,omitempty"`
	// Obligations the adapter must honour; omitted when none.
	Obligations []string `json:"obligations,omitempty"`
	// ShadowVerdict, ShadowRule and ShadowReason are what the policy's
	// observed rules would have answered (docs/policy.md, "Observed
	// rules"): recorded and exported, not enforced; omitted when they
	// change nothing.
	ShadowVerdict string `json:"shadow_verdict,omitempty"`
	ShadowRule    string `json:"shadow_rule,omitempty"`
	ShadowReason  string `json:"shadow_reason,omitempty"`
}

// AuditedDecision is the audit record of a decision: its decision event
// and, when the policy answered, what svc replay needs to ask a candidate
// pack the same question (docs/events.md): the policy's own verdict,
// before the engine's approval and terminal-rule handling, and the exact
// policy input document, with the budgets the decision saw.
type AuditedDecision struct {
	DecisionEvent
	PolicyDecision string `json:"policy_decision,omitempty"`
	PolicyRule     string `json:"policy_rule,omitempty"`
	// PolicyInput is PolicyInputOf's output: compact JSON as json.Marshal
	// writes it, which AppendJSON writes as it is.
	PolicyInput json.RawMessage `json:"policy_input,omitempty"`
}

// Event types of the export feed and the audit log.
const (
	EventDecision       = "decision"
	EventLifecycle      = "lifecycle"
	EventKillSwitch     = "kill_switch"
	EventHoldResolution = "hold_resolution"
	EventHoldCreated    = "hold.created"
	EventHoldResolved   = "hold.resolved"
	EventHoldExpired    = "hold.expired"
	EventFreezeFlipped  = "freeze.flipped"
)

// LifecycleEvent is emitted when the engine starts and stops.
type LifecycleEvent struct {
	TS         string `json:"ts"`
	Event      string `json:"event"`  // always "lifecycle"
	Action     string `json:"action"` // "start" or "stop"
	SvcVersion string `json:"svc_version"`
	EpochMS    int64  `json:"epoch_ms"`
}

// KillSwitchEvent is emitted when the freeze flag is flipped, cleared or
// queried.
type KillSwitchEvent struct {
	TS         string `json:"ts"`
	Event      string `json:"event"`  // always "kill_switch"
	Action     string `json:"action"` // "flipped", "cleared" or "queried"
	Frozen     bool   `json:"frozen"`
	Reason     string `json:"reason"`
	By         string `json:"by,omitempty"`
	SvcVersion string `json:"svc_version"`
	EpochMS    int64  `json:"epoch_ms"`
}

// HoldEvent is the webhook body of hold.created, hold.resolved and
// hold.expired, and the audit record of a hold transition
// (event "hold_resolution" in the audit log).
type HoldEvent struct {
	Event             string     `json:"event"`
	TS                string     `json:"ts"`
	HoldID            string     `json:"hold_id"`
	RuleID            string     `json:"rule_id"`
	Status            string     `json:"status"`
	ExpiresTS         string     `json:"expires_ts"`
	DecisionID        string     `json:"decision_id,omitempty"`
	SessionID         string     `json:"session_id,omitempty"`
	AgentID           string     `json:"agent_id,omitempty"`
	Ability           string     `json:"ability,omitempty"`
	Environment       string     `json:"environment,omitempty"`
	EnvelopeHash      string     `json:"envelope_hash,omitempty"`
	DecidedBy         *Principal `json:"decided_by,omitempty"`
	DecidedTS         string     `json:"decided_ts,omitempty"`
	DecidedByVerified *bool      `json:"decided_by_verified,omitempty"`
	Reason            string     `json:"reason,omitempty"`
	// URL is the hold's page in the web app, on hold.created when
	// SVC_PUBLIC_URL is set.
	URL string `json:"url,omitempty"`
}

// FreezeEvent is the webhook body of freeze.flipped and the audit record of
// a freeze change (event "freeze" in the audit log).
type FreezeEvent struct {
	Event  string `json:"event"`
	TS     string `json:"ts"`
	Frozen bool   `json:"frozen"`
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}
