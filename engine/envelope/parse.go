package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/svc-dev/svc/engine/ijson"
)

// Limits of envelope values.
const (
	maxStringLen   = 4096
	MaxMagnitude   = 1_000_000_000_000
	maxTraceparent = 512
)

// InvalidEnvelope is returned by ParseEnvelope for a structurally valid JSON
// document that is not an acceptable envelope; Field names the culprit.
type InvalidEnvelope struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *InvalidEnvelope) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// ErrInvalidJSON is returned by ParseEnvelope for a body that is not one
// well-formed JSON value.
var ErrInvalidJSON = errors.New("invalid_json")

var knownTopLevel = []string{"svc_version", "agent", "action", "target", "params", "magnitude", "axes",
	"approval", "trajectory_ref", "context", "meta"}

// ParseEnvelope decodes, validates and canonicalises an Action Envelope.
// It returns ErrInvalidJSON for malformed JSON (wrapping an *ijson.Error
// for invalid UTF-8 or an escaped lone surrogate) and *InvalidEnvelope for a
// document that breaks the envelope contract (docs/api.md). It reads the
// body in one checking pass (scanKeys) and one decoding pass over the
// checked values, and refuses exactly what encoding/json based parsing
// refused, with the same errors.
func ParseEnvelope(body []byte) (*Envelope, error) {
	if err := ijson.Check(body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	doc, err := scanKeys(body)
	if err != nil {
		return nil, err
	}
	w, err := decodeWire(doc.members)
	if err != nil {
		return nil, err
	}
	env, err := w.canonical()
	if err != nil {
		return nil, err
	}
	env.Extra = doc.extra()
	return env, nil
}

func (w *wireEnvelope) canonical() (*Envelope, error) {
	v := validator{}
	env := &Envelope{SvcVersion: v.optional("svc_version", w.SvcVersion)}
	v.agent(env, w.Agent)
	v.axes(env, w.Axes)
	v.action(env, w.Action)
	v.target(env, w.Target)
	v.magnitude(env, w.Magnitude)
	v.approval(env, w.Approval)
	env.Params = v.object("params", w.Params)
	env.Money = v.money(env.Params)
	env.Context = v.object("context", w.Context)
	v.context(env)
	if w.TrajectoryRef != nil {
		ref := v.optional("trajectory_ref", w.TrajectoryRef)
		env.TrajectoryRef = &ref
	}
	if w.Meta != nil {
		env.Meta = Meta{
			Timestamp: v.optional("meta.timestamp", w.Meta.Timestamp),
			Nonce:     v.optional("meta.nonce", w.Meta.Nonce),
			Signature: v.optional("meta.signature", w.Meta.Signature),
		}
	}
	if v.err != nil {
		return nil, v.err
	}
	// The verb comes from the ability as cleaned, not as stored (folded):
	// folding would erase camelCase boundaries ("db/dropTable").
	ability := Clean(raw(w.Action.Ability))
	env.Action.Verb = CanonicalVerb(env.Action.RawVerb, ability, env.Axes.Reversibility)
	env.Words = ActionWords(env.Action.RawVerb, ability, raw(w.Action.Namespace))
	return env, nil
}

// validator collects the first contract violation; later checks are no-ops.
type validator struct{ err *InvalidEnvelope }

func (v *validator) fail(field, reason string) {
	if v.err == nil {
		v.err = &InvalidEnvelope{Field: field, Reason: reason}
	}
}

func (v *validator) present(field string, ok bool) bool {
	if !ok {
		v.fail(field, "is required")
	}
	return ok
}

func (v *validator) optional(field string, s *string) string {
	if s == nil {
		return ""
	}
	if len(*s) > maxStringLen {
		v.fail(field, fmt.Sprintf("must be at most %d bytes", maxStringLen))
	}
	return Clean(*s)
}

// raw is a value exactly as the caller sent it, kept for the record beside
// its canonical form.
func raw(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (v *validator) required(field string, s *string) string {
	out := v.optional(field, s)
	if out == "" {
		v.fail(field, "is required and must be a non-empty string")
	}
	return out
}

func (v *validator) enum(field string, s *string, allowed []string) string {
	out := Fold(v.required(field, s))
	if v.err == nil && !slices.Contains(allowed, out) {
		v.fail(field, "must be one of "+strings.Join(allowed, ", "))
	}
	return out
}

func (v *validator) agent(env *Envelope, a *wireAgent) {
	if !v.present("agent", a != nil) {
		return
	}
	env.Agent = Agent{
		ID:         v.required("agent.id", v.identity("agent.id", a.ID)),
		OnBehalfOf: v.optional("agent.on_behalf_of", v.identity("agent.on_behalf_of", a.OnBehalfOf)),
		SessionID:  Fold(v.required("agent.session_id", v.identity("agent.session_id", a.SessionID))),
	}
}

// identity refuses an identity field holding a control character (a
// newline, U+0085) or a format character (a zero-width space, a
// bidirectional override): a log or SIEM line that drops or renders such a
// character would show two distinct identities as one, so none is accepted
// rather than canonicalised away. It returns s for the next check.
func (v *validator) identity(field string, s *string) *string {
	if s == nil {
		return s
	}
	for i, r := range *s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			v.fail(field, fmt.Sprintf("must not contain control or format characters (U+%04X at byte %d)", r, i))
			return s
		}
	}
	return s
}

func (v *validator) axes(env *Envelope, a *wireAxes) {
	if !v.present("axes", a != nil) {
		return
	}
	env.Axes = Axes{
		Reversibility: v.enum("axes.reversibility", a.Reversibility, Reversibilities),
		BlastRadius:   v.enum("axes.blast_radius", a.BlastRadius, BlastRadii),
		Externality:   v.enum("axes.externality", a.Externality, Externalities),
	}
}

func (v *validator) action(env *Envelope, a *wireAction) {
	if !v.present("action", a != nil) {
		return
	}
	v.required("action.verb", a.Verb)
	env.Action = Action{
		Namespace: Fold(v.optional("action.namespace", a.Namespace)),
		RawVerb:   raw(a.Verb),
		Ability:   Fold(v.required("action.ability", a.Ability)),
	}
}

func (v *validator) target(env *Envelope, t *wireTarget) {
	if !v.present("target", t != nil) {
		return
	}
	v.required("target.environment", t.Environment)
	env.Target = Target{
		Kind:           Fold(v.optional("target.kind", t.Kind)),
		Ref:            v.optional("target.ref", t.Ref),
		Environment:    CanonicalEnvironment(raw(t.Environment)),
		RawEnvironment: raw(t.Environment),
	}
}

func (v *validator) magnitude(env *Envelope, m *wireMagnitude) {
	if !v.present("magnitude", m != nil) ||
		!v.present("magnitude.count", len(m.Count) > 0 && string(m.Count) != "null") {
		return
	}
	n, err := strconv.ParseInt(string(m.Count), 10, 64) // a JSON integer literal, not a string or float
	if err != nil || n < 1 || n > MaxMagnitude {
		v.fail("magnitude.count", fmt.Sprintf("must be an integer from 1 to %d", int64(MaxMagnitude)))
		return
	}
	env.Magnitude.Count = n
}

func (v *validator) approval(env *Envelope, a *wireApproval) {
	if !v.present("approval", a != nil) || !v.present("approval.present", a.Present != nil) {
		return
	}
	env.Approval = Approval{Present: *a.Present, HoldID: v.optional("approval.hold_id", a.HoldID)}
}

// object decodes an optional JSON object field; null or absent is empty.
// raw is a value scanKeys has checked, so a leading '{' makes it an object.
func (v *validator) object(field string, raw json.RawMessage) map[string]any {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}
	}
	if raw[0] != '{' {
		v.fail(field, "must be an object")
		return map[string]any{}
	}
	r := wireReader{data: raw}
	return r.value().(map[string]any)
}

func (v *validator) context(env *Envelope) {
	env.Mode = ModeEnforce
	if raw, ok := env.Context["mode"]; ok {
		s, isString := raw.(string)
		mode := Fold(s)
		if !isString || (mode != ModeEnforce && mode != ModeObserve) {
			v.fail("context.mode", "must be enforce or observe")
			return
		}
		env.Mode = mode
	}
	if raw, ok := env.Context["traceparent"]; ok {
		s, isString := raw.(string)
		if !isString || len(s) > maxTraceparent {
			v.fail("context.traceparent", fmt.Sprintf("must be a string of at most %d bytes", maxTraceparent))
		}
	}
}
