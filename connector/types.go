package connector

import (
	"time"

	"github.com/svc-dev/svc/connector/tenancy"
)

// Transports recorded in the ledger.
const (
	TransportGuardrailAPI = "generic_guardrail_api" // path 1: LiteLLM's generic guardrail API
	TransportInProcess    = "in_process"            // path 2: the in-process module's batch route
)

// Outcomes of one tool call (gateway-batch-contract.md).
const (
	OutcomeAllow       = "allow"
	OutcomeDeny        = "deny"
	OutcomeHoldTimeout = "hold_timeout"
	OutcomeUnmapped    = "unmapped"
	OutcomeFailClosed  = "fail_closed"
)

// Refusal error codes (gateway spec §2.2).
const (
	ErrDenied         = "svc_denied"
	ErrHoldTimeout    = "svc_hold_timeout"
	ErrTenantUnmapped = "svc_tenant_unmapped"
	ErrFailClosed     = "svc_fail_closed"
)

// Rules the connector itself answers under.
const (
	RuleFailClosed     = "svc.core/fail_closed"
	RuleTenantUnmapped = "svc.connector/tenant_unmapped"
)

// Enforcement stages of a ledger row (gateway spec §2.3).
const (
	StageRefused = "refused_at_gateway"
	StageAllowed = "allowed_at_gateway"
)

// Request is one gateway answer to govern, whichever route brought it.
type Request struct {
	Transport  string
	Model      string
	Caller     tenancy.Caller
	EndUser    string // user_api_key_end_user_id
	Session    SessionHints
	Deployment Deployment
	// HoldWait caps the connector's SVC_GATEWAY_HOLD_WAIT for this request
	// (the batch route's hold_wait_seconds); nil leaves it.
	HoldWait  *time.Duration
	ToolCalls []ToolCall
}

// SessionHints are the session sources of gateway spec §2.5, as sent.
type SessionHints struct {
	SvcSession string // additional_provider_specific_params.svc_session
	Header     string // the x-svc-session header's value; "[present]" is discarded
	TraceID    string // litellm_trace_id
	CallID     string // litellm_call_id
}

// Deployment is where the model answer came from; path 1 never knows it.
type Deployment struct {
	APIBaseHost  *string `json:"api_base_host"`
	DeploymentID *string `json:"deployment_id"`
	Provider     *string `json:"provider"`
}

// ToolCall is one tool call of the model's answer.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Refusal is one refused call of the refusal payload (gateway spec §2.2).
type Refusal struct {
	Error      string `json:"error"`
	Rule       string `json:"rule"`
	Reason     string `json:"reason"`
	ToolCallID string `json:"tool_call_id"`
	Tool       string `json:"tool"`
	Stage      string `json:"stage"`
	HoldID     string `json:"hold_id,omitempty"`
}

// HoldDecision is who resolved a hold and how (gateway spec §2.3).
type HoldDecision struct {
	DecidedBy  *Principal `json:"decided_by"`
	Resolution string     `json:"resolution"`
	Verified   bool       `json:"verified"`
}

// Principal is a {type, id} identity of the engine.
type Principal struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Outcome is what became of one tool call.
type Outcome struct {
	ToolCallID            string   `json:"tool_call_id"`
	Tool                  string   `json:"tool"`
	Outcome               string   `json:"outcome"`
	Rule                  string   `json:"rule"`
	Reason                string   `json:"reason"`
	DecisionID            *string  `json:"decision_id"`
	HoldID                *string  `json:"hold_id"`
	ReleasedAfterApproval bool     `json:"released_after_approval"`
	Refusal               *Refusal `json:"refusal"`
	Enforced              bool     `json:"enforced"`

	verdict      string   // the engine's decision, "" when none was asked
	obligations  []string // the engine decision's obligations
	envelopeHash string
	holdDecision *HoldDecision
	classifiedBy string
}

// Refused reports whether the call is refused (in enforce mode).
func (o *Outcome) Refused() bool { return o.Outcome != OutcomeAllow }

// Result is the outcome of a whole request.
type Result struct {
	Outcomes       []Outcome       `json:"outcomes"`
	RefusalPayload *RefusalPayload `json:"refusal_payload"`
}

// RefusalPayload is {svc: {refused: [...], version: 1}}.
type RefusalPayload struct {
	Svc RefusalList `json:"svc"`
}

// RefusalList is the body of a refusal payload.
type RefusalList struct {
	Refused []Refusal `json:"refused"`
	Version int       `json:"version"`
}

// Blocked reports whether the request is refused as a whole: some call is
// refused and the connector enforces.
func (r *Result) Blocked() bool {
	return r.RefusalPayload != nil && len(r.Outcomes) > 0 && r.Outcomes[0].Enforced
}
