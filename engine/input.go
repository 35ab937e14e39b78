package engine

import "github.com/svc-dev/svc/engine/envelope"

// PolicyInput is the input document handed to OPA (docs/policy.md). Only the
// engine builds it: Cumulative comes from the ledger and Frozen from the
// operator's kill switch, never from the caller.
type PolicyInput struct {
	Envelope   *envelope.Envelope `json:"envelope"`
	Cumulative Cumulative         `json:"cumulative"`
	Frozen     bool               `json:"frozen"`
}

// Cumulative is the session's prior totals within the rolling window, before
// the action being decided.
type Cumulative struct {
	WindowSeconds int64 `json:"window_seconds"`
	Totals
}
