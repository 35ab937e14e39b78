package engine

// PolicyInput is the input document handed to OPA (docs/policy.md). Only the
// engine builds it: Cumulative comes from the ledger and Frozen from the
// operator's kill switch, never from the caller.
type PolicyInput struct {
	Envelope    *Envelope  `json:"envelope"`
	ActionWords []string   `json:"action_words"`
	Cumulative  Cumulative `json:"cumulative"`
	Frozen      bool       `json:"frozen"`
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
