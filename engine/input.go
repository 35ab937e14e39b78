package engine

import (
	"encoding/json"

	"github.com/svc-dev/svc/engine/envelope"
)

// PolicyInput is the input document handed to OPA (docs/policy.md). Only the
// engine builds it: Cumulative comes from the ledger and Frozen from the
// operator's kill switch, never from the caller.
type PolicyInput struct {
	Envelope    *envelope.Envelope `json:"envelope"`
	ActionWords []string           `json:"action_words"`
	Cumulative  Cumulative         `json:"cumulative"`
	Frozen      bool               `json:"frozen"`
}

// Cumulative is what was spent within the rolling window before the action
// being decided: by its session (at the top level, as before agent and
// principal budgets existed), by its agent and by its principal (zero when
// the envelope names none).
type Cumulative struct {
	WindowSeconds int64 `json:"window_seconds"`
	Usage
	Agent     Usage `json:"agent"`
	Principal Usage `json:"principal"`
}

// PolicyInputOf is the policy input document of env, as the engine sends it
// to OPA: unknown envelope members removed, the action's words, what was
// spent before it, and the freeze flag.
func PolicyInputOf(env *envelope.Envelope, c Cumulative, frozen bool) (json.RawMessage, error) {
	policyEnv := *env
	policyEnv.Extra = nil // unknown fields never influence a decision
	words := env.Words
	if words == nil {
		words = []string{} // an envelope not made by ParseEnvelope (tests build some)
	}
	return appendPolicyInput(make([]byte, 0, policyInputSize),
		PolicyInput{Envelope: &policyEnv, ActionWords: words, Cumulative: c, Frozen: frozen})
}

// policyInputSize is room for the policy input of a typical envelope.
const policyInputSize = 1536
