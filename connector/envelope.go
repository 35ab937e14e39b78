package connector

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Envelope is the Action Envelope the connector sends to /v1/decide
// (docs/api.md); the engine canonicalises it again.
type Envelope struct {
	Agent     Agent          `json:"agent"`
	Action    Action         `json:"action"`
	Target    Target         `json:"target"`
	Params    map[string]any `json:"params"`
	Magnitude Magnitude      `json:"magnitude"`
	Axes      Axes           `json:"axes"`
	Approval  Approval       `json:"approval"`
	Context   map[string]any `json:"context"`
}

// Agent is the envelope's agent: gateway:<org>/<model> acting for the
// tenant's principal, in the namespaced session.
type Agent struct {
	ID         string `json:"id"`
	OnBehalfOf string `json:"on_behalf_of"`
	SessionID  string `json:"session_id"`
}

// Action is namespace gateway, the classified verb and gateway/<tool>.
type Action struct {
	Namespace string `json:"namespace"`
	Verb      string `json:"verb"`
	Ability   string `json:"ability"`
}

// Target is what the call touches, in the tenant's environment.
type Target struct {
	Kind        string `json:"kind"`
	Ref         string `json:"ref"`
	Environment string `json:"environment"`
}

// Magnitude is how many items the call touches.
type Magnitude struct {
	Count int64 `json:"count"`
}

// Axes are the three risk axes of the call.
type Axes struct {
	Reversibility string `json:"reversibility"`
	BlastRadius   string `json:"blast_radius"`
	Externality   string `json:"externality"`
}

// Approval marks the re-submission after a hold was approved.
type Approval struct {
	Present bool    `json:"present"`
	HoldID  *string `json:"hold_id"`
}

// rawArguments is how arguments that are not one JSON object are shown to
// the policy and the approver: their digest binds the approval to them.
func rawArguments(s string) map[string]any {
	const prefix = 512
	p := s
	if len(p) > prefix {
		p = p[:prefix]
	}
	return map[string]any{"unparsed_arguments_sha256": digest(s), "unparsed_arguments_prefix": strings.ToValidUTF8(p, "")}
}

// digest is the sha256 hex of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
