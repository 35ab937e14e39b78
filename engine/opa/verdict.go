package opa

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// errPolicyUndefined is the answer of an evaluation in which
// data.svc.policy.decision is not defined, typically because the svc.policy
// package is not loaded; every evaluator fails the decision with it.
var errPolicyUndefined = errors.New("policy decision is undefined")

// Bounds of a verdict's obligations.
const (
	maxObligations     = 16
	maxObligationBytes = 64
)

// verdictMembers are the members of a verdict, spelled as svc reads them:
// decision, rule and reason are required, obligations and shadow optional.
var verdictMembers = [...]string{"decision", "rule", "reason", "obligations", "shadow"}

// verdictOf decodes a decision document and checks it is a valid verdict.
// Member names are matched exactly: a member that spells one of
// verdictMembers another way, or repeats one, makes the document malformed.
func verdictOf(value json.RawMessage) (engine.Verdict, error) {
	v, err := verdictFields(value)
	if err != nil {
		return engine.Verdict{}, err
	}
	if v.Shadow != nil && v.Shadow.Shadow != nil {
		return engine.Verdict{}, fmt.Errorf("policy decision %q: a shadow verdict has no shadow of its own", opaSnippet(value))
	}
	return v, nil
}

func verdictFields(value json.RawMessage) (engine.Verdict, error) {
	var members [len(verdictMembers)]json.RawMessage
	if err := envelope.ExactMembers(value, verdictMembers[:], members[:]); err != nil {
		return engine.Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %w", opaSnippet(value), err)
	}
	var fields [3]string
	for i, m := range members[:3] {
		if m == nil || string(m) == "null" {
			return engine.Verdict{}, fmt.Errorf("policy decision %q lacks decision, rule or reason", opaSnippet(value))
		}
		var ok bool
		if fields[i], ok = envelope.JSONString(m); !ok {
			return engine.Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %s is %s",
				opaSnippet(value), verdictMembers[i], opaSnippet(m))
		}
	}
	v := engine.Verdict{Decision: fields[0], Rule: fields[1], Reason: fields[2]}
	if !v.Valid() {
		return engine.Verdict{}, fmt.Errorf("policy verdict is invalid: decision %q, rule %q", v.Decision, v.Rule)
	}
	var err error
	if v.Obligations, err = obligationsOf(members[3]); err != nil {
		return engine.Verdict{}, fmt.Errorf("policy decision %q: %w", opaSnippet(value), err)
	}
	if m := members[4]; m != nil && string(m) != "null" {
		shadow, err := verdictFields(m)
		if err != nil {
			return engine.Verdict{}, fmt.Errorf("shadow: %w", err)
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
