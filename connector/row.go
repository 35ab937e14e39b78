package connector

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/connector/tenancy"
	"github.com/svc-dev/svc/engine"
)

// Row is one ledger row: the connector's record of one tool call (gateway
// spec §2.3). It never holds the model's prose or a key.
type Row struct {
	// Seq is the row's order in the ledger, set when it is read back (the
	// ledger numbers rows as it commits them; 0 in a row being recorded).
	Seq                   int64         `json:"seq"`
	Time                  time.Time     `json:"ts"`
	DecisionID            *string       `json:"decision_id"`
	Outcome               string        `json:"outcome"`
	Verdict               *string       `json:"verdict"`
	Rule                  string        `json:"rule"`
	Reason                string        `json:"reason"`
	EnvelopeHash          *string       `json:"envelope_hash"`
	Org                   *string       `json:"org"`
	Session               *string       `json:"session"`
	Tool                  string        `json:"tool"`
	ToolCallID            string        `json:"tool_call_id"`
	EnforcementStage      string        `json:"enforcement_stage"`
	ReleasedAfterApproval bool          `json:"released_after_approval"`
	HoldID                *string       `json:"hold_id"`
	HoldDecision          *HoldDecision `json:"hold_decision"`
	Transport             string        `json:"transport"`
	APIBaseHost           *string       `json:"api_base_host"`
	DeploymentID          *string       `json:"deployment_id"`
	Provider              *string       `json:"provider"`
	Mode                  string        `json:"mode"`
	Enforced              bool          `json:"enforced"`
	Model                 string        `json:"model"`
	ClassifiedBy          string        `json:"classified_by"`
	GatewayCallID         string        `json:"gateway_call_id"`
	KeyAlias              *string       `json:"key_alias"`
	// Obligations are those of the engine's decision (never nil).
	Obligations []string `json:"obligations"`
	// Params are the envelope's params, recorded only when the decision
	// carries log_params; nil otherwise.
	Params json.RawMessage `json:"params"`
}

// row is the ledger row of a call. The stage says what the gateway was
// told: in observe mode every call is allowed at the gateway. A decision
// carrying log_params has the envelope's params recorded (the obligation
// honoured before the call is released); an error is returned when they
// cannot be.
func (g *Governor) row(req Request, c *call, t *tenancy.Tenant, session string) (Row, error) {
	o := c.out
	stage := StageAllowed
	if o.Refused() && o.Enforced {
		stage = StageRefused
	}
	r := Row{Time: g.now().UTC(), DecisionID: o.DecisionID, Outcome: o.Outcome, Rule: o.Rule, Reason: o.Reason,
		Tool: Bounded(c.tc.Name), ToolCallID: Bounded(c.tc.ID), EnforcementStage: stage, ReleasedAfterApproval: o.ReleasedAfterApproval,
		HoldID: o.HoldID, HoldDecision: o.holdDecision, Transport: req.Transport, APIBaseHost: req.Deployment.APIBaseHost,
		DeploymentID: req.Deployment.DeploymentID, Provider: req.Deployment.Provider, Mode: g.mode, Enforced: o.Enforced,
		Model: Bounded(req.Model), ClassifiedBy: o.classifiedBy, GatewayCallID: Bounded(req.Session.CallID),
		Verdict: optional(o.verdict), EnvelopeHash: optional(o.envelopeHash)}
	if !tenancy.SecretShaped(req.Caller.KeyAlias) { // a credential put in the alias by a custom auth is not kept
		r.KeyAlias = optional(Bounded(req.Caller.KeyAlias))
	}
	if t != nil {
		r.Org, r.Session = &t.Org, &session
	}
	r.Obligations = append([]string{}, o.obligations...)
	if slices.Contains(o.obligations, engine.ObligationLogParams) {
		var params map[string]any
		if c.env != nil {
			params = c.env.Params
		}
		raw, err := json.Marshal(params)
		if err != nil {
			return r, fmt.Errorf("record the params of %s: %w", c.tc.Name, err)
		}
		r.Params = raw
	}
	return r, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MaxRecorded bounds, in bytes, a value from the gateway that a ledger row
// or a log line keeps as sent: a tool name, a call id, a model name, a key
// alias. The model chooses some of them, at any length.
const MaxRecorded = 256

// Bounded is s, or when it is longer than MaxRecorded its first 128 bytes
// (a character they cut dropped, as rawArguments does) followed by "…" and
// the SHA-256 of the whole of it, so that two long values stay apart.
func Bounded(s string) string {
	if len(s) <= MaxRecorded {
		return s
	}
	return strings.ToValidUTF8(s[:128], "") + "…sha256:" + digest(s)
}
