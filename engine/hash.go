package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// hashProjection is the part of a canonical envelope an approval binds to
// (spec §2.1): action, axes, magnitude and target. Raw spellings are left
// out, so "remove" and "delete" of the same target hash alike.
type hashProjection struct {
	Action    hashAction `json:"action"`
	Axes      Axes       `json:"axes"`
	Magnitude Magnitude  `json:"magnitude"`
	Target    hashTarget `json:"target"`
}

type hashAction struct {
	Namespace string `json:"namespace"`
	Verb      string `json:"verb"`
	Ability   string `json:"ability"`
}

type hashTarget struct {
	Kind        string `json:"kind"`
	Ref         string `json:"ref"`
	Environment string `json:"environment"`
}

// Hash returns the envelope hash: sha256 hex of the RFC 8785 (JCS)
// canonical JSON of the canonical {action, axes, magnitude, target}.
func (e *Envelope) Hash() (string, error) {
	p := hashProjection{
		Action:    hashAction{Namespace: e.Action.Namespace, Verb: e.Action.Verb, Ability: e.Action.Ability},
		Axes:      e.Axes,
		Magnitude: e.Magnitude,
		Target:    hashTarget{Kind: e.Target.Kind, Ref: e.Target.Ref, Environment: e.Target.Environment},
	}
	return jcsHash(p)
}

// ParamsHash returns sha256 hex of the JCS form of params, binding an
// approval to the exact parameters it was granted for.
func (e *Envelope) ParamsHash() (string, error) {
	params := e.Params
	if params == nil {
		params = map[string]any{}
	}
	return jcsHash(params)
}

func jcsHash(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("marshal for hashing: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalise json: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
