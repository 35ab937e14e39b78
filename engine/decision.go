package engine

import (
	"encoding/json"
	"fmt"
	"time"
)

// Verdicts a decision can carry. Precedence is deny > require_approval > allow.
const (
	Allow           = "allow"
	Deny            = "deny"
	RequireApproval = "require_approval"
)

// Rule identifiers the engine itself produces (policy rules come from Rego).
const (
	RuleInternalError        = "svc.core/internal_error"
	RuleInvalidRequest       = "svc.core/invalid_request"
	RuleHoldCreationFailed   = "svc.core/hold_creation_failed"
	RuleHoldNotRedeemable    = "svc.core/hold_not_redeemable"
	RuleApprovedResubmission = "svc.policy/approved_resubmission"
)

// Reason codes of a refused re-submission (spec §3, §7).
const (
	ReasonHoldNotFound         = "svc_hold_not_found"
	ReasonHoldNotApproved      = "svc_hold_not_approved"
	ReasonHoldExpired          = "svc_hold_expired"
	ReasonHoldConsumed         = "svc_hold_consumed"
	ReasonHoldEnvelopeMismatch = "svc_hold_envelope_mismatch"
	ReasonHoldActorMismatch    = "svc_hold_actor_mismatch"
)

// Decision is the response body of POST /v1/decide (spec §2.2). Beside the
// fields of the spec it carries the envelope hash and the canonical and raw
// verb and environment the policy saw, so an adapter can log what was decided.
type Decision struct {
	Decision         string   `json:"decision"`
	Reason           string   `json:"reason"`
	Detail           string   `json:"detail,omitempty"`
	Rule             string   `json:"rule"`
	Obligations      []string `json:"obligations"`
	Modulation       any      `json:"modulation"`
	DecisionID       string   `json:"decision_id"`
	HoldID           string   `json:"hold_id,omitempty"`
	ExpiresTS        string   `json:"expires_ts,omitempty"`
	ParentDecisionID string   `json:"parent_decision_id,omitempty"`
	EnvelopeHash     string   `json:"envelope_hash,omitempty"`
	Verb             string   `json:"verb,omitempty"`
	RawVerb          string   `json:"raw_verb,omitempty"`
	Environment      string   `json:"environment,omitempty"`
	RawEnvironment   string   `json:"raw_environment,omitempty"`
}

// Verdict is what a policy evaluation returns: the decision, the rule that
// fired and a human-readable reason.
type Verdict struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason"`
}

// Valid reports whether the verdict names a known decision and a rule.
func (v Verdict) Valid() bool {
	switch v.Decision {
	case Allow, Deny, RequireApproval:
		return v.Rule != ""
	}
	return false
}

// FormatTime renders t as RFC 3339 UTC with millisecond precision, the one
// timestamp format of every svc document.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// verdictOf decodes a decision document and checks it is a valid verdict.
func verdictOf(value json.RawMessage) (Verdict, error) {
	var fields struct {
		Decision, Rule, Reason *string
	}
	if err := json.Unmarshal(value, &fields); err != nil {
		return Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %w", opaSnippet(value), err)
	}
	if fields.Decision == nil || fields.Rule == nil || fields.Reason == nil {
		return Verdict{}, fmt.Errorf("policy decision %q lacks decision, rule or reason", opaSnippet(value))
	}
	v := Verdict{Decision: *fields.Decision, Rule: *fields.Rule, Reason: *fields.Reason}
	if !v.Valid() {
		return Verdict{}, fmt.Errorf("policy verdict is invalid: decision %q, rule %q", v.Decision, v.Rule)
	}
	return v, nil
}
