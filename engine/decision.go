package engine

import (
	"slices"
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

// RuleTerminal is the policy rule that is a deny, never a hold (spec §2.2:
// irreversible_systemic_prod). A require_approval a policy answers under it
// is denied, since no approval could ever lift it.
const RuleTerminal = "svc.policy/irreversible_systemic_prod"

// Reason codes of a refused re-submission (spec §3, §7).
const (
	ReasonHoldNotFound         = "svc_hold_not_found"
	ReasonHoldNotApproved      = "svc_hold_not_approved"
	ReasonHoldExpired          = "svc_hold_expired"
	ReasonHoldConsumed         = "svc_hold_consumed"
	ReasonHoldEnvelopeMismatch = "svc_hold_envelope_mismatch"
	ReasonHoldActorMismatch    = "svc_hold_actor_mismatch"
	ReasonHoldRuleMismatch     = "svc_hold_rule_mismatch"
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
	HoldReused       bool     `json:"hold_reused,omitempty"`
	ExpiresTS        string   `json:"expires_ts,omitempty"`
	ParentDecisionID string   `json:"parent_decision_id,omitempty"`
	EnvelopeHash     string   `json:"envelope_hash,omitempty"`
	Verb             string   `json:"verb,omitempty"`
	RawVerb          string   `json:"raw_verb,omitempty"`
	Environment      string   `json:"environment,omitempty"`
	RawEnvironment   string   `json:"raw_environment,omitempty"`
}

// Verdict is what a policy evaluation returns: the decision, the rule that
// fired, a human-readable reason, the obligations the adapter must honour,
// and the verdict its observed rules would have given (Shadow, nil when they
// change nothing).
type Verdict struct {
	Decision    string   `json:"decision"`
	Rule        string   `json:"rule"`
	Reason      string   `json:"reason"`
	Obligations []string `json:"obligations,omitempty"`
	Shadow      *Verdict `json:"shadow,omitempty"`
}

// Valid reports whether the verdict names a known decision and a rule.
func (v Verdict) Valid() bool {
	switch v.Decision {
	case Allow, Deny, RequireApproval:
		return v.Rule != ""
	}
	return false
}

// Obligations svc documents (docs/policy.md, "Obligations"): the closed set
// every adapter svc ships understands. An adapter that meets any other
// refuses the action (fail closed).
const (
	// ObligationNotify: tell the principal the agent acts for (or the
	// operator's channel) that the action ran, after running it.
	ObligationNotify = "notify"
	// ObligationLogParams: write the action's full params to the adapter's
	// own log before running it.
	ObligationLogParams = "log_params"
)

// KnownObligations are the obligations of the closed set.
var KnownObligations = []string{ObligationLogParams, ObligationNotify}

// UnknownObligations returns the obligations of obligations outside the
// closed set, in order.
func UnknownObligations(obligations []string) []string {
	var unknown []string
	for _, o := range obligations {
		if !slices.Contains(KnownObligations, o) {
			unknown = append(unknown, o)
		}
	}
	return unknown
}

// FormatTime renders t as RFC 3339 UTC with millisecond precision, the one
// timestamp format of every svc document.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
