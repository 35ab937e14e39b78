package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

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
	if canon, ok := e.canonicalProjection(); ok {
		sum := sha256.Sum256(canon)
		return hex.EncodeToString(sum[:]), nil
	}
	return jcsHash(e.projection())
}

func (e *Envelope) projection() hashProjection {
	return hashProjection{
		Action:    hashAction{Namespace: e.Action.Namespace, Verb: e.Action.Verb, Ability: e.Action.Ability},
		Axes:      e.Axes,
		Magnitude: e.Magnitude,
		Target:    hashTarget{Kind: e.Target.Kind, Ref: e.Target.Ref, Environment: e.Target.Environment},
	}
}

// jcsMaxInteger is the largest integer JCS writes as plain digits (the
// largest exactly representable in an IEEE 754 double).
const jcsMaxInteger = 1 << 53

// canonicalProjection writes the JCS form of the hash projection directly,
// sparing the decision path a marshal and a re-parse: its members are
// strings and one integer under fixed ASCII keys, so the canonical form is
// the keys in sorted order, JCS string escaping and the integer's digits.
// It reports false for what the general path handles differently (invalid
// UTF-8, which marshalling replaces; a count beyond exact double range),
// and TestCanonicalProjectionMatchesJCS checks it against that path.
func (e *Envelope) canonicalProjection() ([]byte, bool) {
	fields := [...]string{e.Action.Ability, e.Action.Namespace, e.Action.Verb,
		e.Axes.BlastRadius, e.Axes.Externality, e.Axes.Reversibility,
		e.Target.Environment, e.Target.Kind, e.Target.Ref}
	for _, f := range fields {
		if !utf8.ValidString(f) {
			return nil, false
		}
	}
	n := e.Magnitude.Count
	if n > jcsMaxInteger || n < -jcsMaxInteger {
		return nil, false
	}
	b := make([]byte, 0, 256)
	for i, key := range [...]string{`{"action":{"ability":`, `,"namespace":`, `,"verb":`,
		`},"axes":{"blast_radius":`, `,"externality":`, `,"reversibility":`} {
		b = appendJCSString(append(b, key...), fields[i])
	}
	b = strconv.AppendInt(append(b, `},"magnitude":{"count":`...), n, 10)
	for i, key := range [...]string{`},"target":{"environment":`, `,"kind":`, `,"ref":`} {
		b = appendJCSString(append(b, key...), fields[6+i])
	}
	return append(b, "}}"...), true
}

// appendJCSString appends s (valid UTF-8) as a JCS string: only the quote,
// the backslash and control characters are escaped, the latter in their
// short form where JSON has one and as \u00xx (lower-case hex) otherwise.
func appendJCSString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(b, '"')
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
