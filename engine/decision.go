package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/svc-dev/svc/engine/envelope"
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

// Bounds of a verdict's obligations.
const (
	maxObligations     = 16
	maxObligationBytes = 64
)

// FormatTime renders t as RFC 3339 UTC with millisecond precision, the one
// timestamp format of every svc document.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// verdictMembers are the members of a verdict, spelled as svc reads them:
// decision, rule and reason are required, obligations and shadow optional.
var verdictMembers = [...]string{"decision", "rule", "reason", "obligations", "shadow"}

// verdictOf decodes a decision document and checks it is a valid verdict.
// Member names are matched exactly: a member that spells one of
// verdictMembers another way, or repeats one, makes the document malformed.
func verdictOf(value json.RawMessage) (Verdict, error) {
	v, err := verdictFields(value)
	if err != nil {
		return Verdict{}, err
	}
	if v.Shadow != nil && v.Shadow.Shadow != nil {
		return Verdict{}, fmt.Errorf("policy decision %q: a shadow verdict has no shadow of its own", opaSnippet(value))
	}
	return v, nil
}

func verdictFields(value json.RawMessage) (Verdict, error) {
	var members [len(verdictMembers)]json.RawMessage
	if err := envelope.ExactMembers(value, verdictMembers[:], members[:]); err != nil {
		return Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %w", opaSnippet(value), err)
	}
	var fields [3]string
	for i, m := range members[:3] {
		if m == nil || string(m) == "null" {
			return Verdict{}, fmt.Errorf("policy decision %q lacks decision, rule or reason", opaSnippet(value))
		}
		var ok bool
		if fields[i], ok = envelope.JSONString(m); !ok {
			return Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %s is %s",
				opaSnippet(value), verdictMembers[i], opaSnippet(m))
		}
	}
	v := Verdict{Decision: fields[0], Rule: fields[1], Reason: fields[2]}
	if !v.Valid() {
		return Verdict{}, fmt.Errorf("policy verdict is invalid: decision %q, rule %q", v.Decision, v.Rule)
	}
	var err error
	if v.Obligations, err = obligationsOf(members[3]); err != nil {
		return Verdict{}, fmt.Errorf("policy decision %q: %w", opaSnippet(value), err)
	}
	if m := members[4]; m != nil && string(m) != "null" {
		shadow, err := verdictFields(m)
		if err != nil {
			return Verdict{}, fmt.Errorf("shadow: %w", err)
		}
		v.Shadow = &shadow
	}
	return v, nil
}

// obligationsOf reads a verdict's obligations: absent or null is none; else
// an array of at most maxObligations distinct non-empty strings of at most
// maxObligationBytes each. Unknown names are kept: the adapters refuse them.
func obligationsOf(m json.RawMessage) ([]string, error) {
	if m == nil || string(m) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(m, &list); err != nil {
		return nil, fmt.Errorf("obligations must be an array of strings, got %s", opaSnippet(m))
	}
	if len(list) > maxObligations {
		return nil, fmt.Errorf("at most %d obligations, got %d", maxObligations, len(list))
	}
	for i, o := range list {
		if o == "" || len(o) > maxObligationBytes || slices.Contains(list[:i], o) {
			return nil, fmt.Errorf("obligation %q must be a distinct non-empty string of at most %d bytes", o, maxObligationBytes)
		}
	}
	return list, nil
}
