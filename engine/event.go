package engine

// DecisionEvent is the record of one decision: the audit line (kind
// "decision") and the body of the syslog decision event (spec §6.2). Optional
// fields are omitted when they do not apply.
type DecisionEvent struct {
	TS                string `json:"ts"`
	Event             string `json:"event"`
	Verdict           string `json:"verdict"`
	RuleID            string `json:"rule_id"`
	Verb              string `json:"verb"`
	RawVerb           string `json:"raw_verb,omitempty"`
	Ability           string `json:"ability"`
	Axes              Axes   `json:"axes"`
	MagnitudeCount    int64  `json:"magnitude_count"`
	SessionID         string `json:"session_id"`
	AgentID           string `json:"agent_id"`
	OnBehalfOf        string `json:"on_behalf_of"`
	Environment       string `json:"environment"`
	RawEnvironment    string `json:"raw_environment,omitempty"`
	Mode              string `json:"mode"`
	DecisionLatencyMS int64  `json:"decision_latency_ms"`
	Reason            string `json:"reason"`
	SvcVersion        string `json:"svc_version"`
	EpochMS           int64  `json:"epoch_ms"`
	DecisionID        string `json:"decision_id"`
	EnvelopeHash      string `json:"envelope_hash"`
	HoldID            string `json:"hold_id,omitempty"`
	ParentDecisionID  string `json:"parent_decision_id,omitempty"`
	Traceparent       string `json:"traceparent,omitempty"`
	Gate              string `json:"gate,omitempty"`
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
