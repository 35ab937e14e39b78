package envelope

import "encoding/json"

// Axis values, in ascending risk (spec §2.1).
var (
	Reversibilities = []string{"reversible", "recoverable", "irreversible"}
	BlastRadii      = []string{"single", "scoped", "broad", "systemic"}
	Externalities   = []string{"internal", "outbound", "physical"}
)

// Adapter modes an envelope may declare in context.mode.
const (
	ModeEnforce = "enforce"
	ModeObserve = "observe"
)

// Envelope is a parsed and canonicalised Action Envelope (spec §2.1). The
// string fields that policy reads hold canonical values; the raw verb and
// environment are kept beside them for the record.
type Envelope struct {
	SvcVersion    string                     `json:"svc_version,omitempty"`
	Agent         Agent                      `json:"agent"`
	Action        Action                     `json:"action"`
	Target        Target                     `json:"target"`
	Params        map[string]any             `json:"params"`
	Money         *Money                     `json:"money,omitempty"`
	Magnitude     Magnitude                  `json:"magnitude"`
	Axes          Axes                       `json:"axes"`
	Approval      Approval                   `json:"approval"`
	TrajectoryRef *string                    `json:"trajectory_ref"`
	Context       map[string]any             `json:"context"`
	Meta          Meta                       `json:"meta"`
	Mode          string                     `json:"mode"`
	Extra         map[string]json.RawMessage `json:"extra,omitempty"`
	// Words are the action's words for the sensitive-action tables
	// (ActionWords); they reach the policy as input.action_words.
	Words []string `json:"-"`
}

// Agent identifies who proposes the action and for whom.
type Agent struct {
	ID         string `json:"id"`
	OnBehalfOf string `json:"on_behalf_of"`
	SessionID  string `json:"session_id"`
}

// Action names what is about to be done.
type Action struct {
	Namespace string `json:"namespace"`
	Verb      string `json:"verb"`
	RawVerb   string `json:"raw_verb"`
	Ability   string `json:"ability"`
}

// Target names what the action touches.
type Target struct {
	Kind           string `json:"kind"`
	Ref            string `json:"ref"`
	Environment    string `json:"environment"`
	RawEnvironment string `json:"raw_environment"`
}

// Magnitude is how much the action touches.
type Magnitude struct {
	Count int64 `json:"count"`
}

// Axes are the three risk axes, each a closed enum.
type Axes struct {
	Reversibility string `json:"reversibility"`
	BlastRadius   string `json:"blast_radius"`
	Externality   string `json:"externality"`
}

// Approval marks a re-submission after a hold was resolved.
type Approval struct {
	Present bool   `json:"present"`
	HoldID  string `json:"hold_id"`
}

// Meta carries envelope metadata that svc records but does not decide on.
type Meta struct {
	Timestamp string `json:"timestamp"`
	Nonce     string `json:"nonce"`
	Signature string `json:"signature"`
}

// Traceparent returns context.traceparent when the caller sent a string.
func (e *Envelope) Traceparent() string {
	s, _ := e.Context["traceparent"].(string)
	return s
}
