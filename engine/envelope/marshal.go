package envelope

import (
	"encoding/json"
	"fmt"
	"maps"
)

// MarshalWire writes e as the wire document that POST /v1/decide reads
// (docs/api.md), and checks it as the engine will: it returns the
// *InvalidEnvelope that ParseEnvelope finds in the document, so a caller
// never sends what the engine would refuse. The verb and environment are
// written as sent (RawVerb, RawEnvironment) or, when those are empty, as
// their canonical values; Mode is written as context.mode unless the
// context already says as much; unknown top-level members (Extra) are
// written back as they are. The engine reads the document afresh: the verb
// it decides on is CanonicalVerb of the verb and ability written here.
func (e *Envelope) MarshalWire() ([]byte, error) {
	doc := map[string]any{
		"agent": map[string]any{"id": e.Agent.ID, "on_behalf_of": e.Agent.OnBehalfOf,
			"session_id": e.Agent.SessionID},
		"action": map[string]any{"namespace": e.Action.Namespace, "verb": orDefault(e.Action.RawVerb, e.Action.Verb),
			"ability": e.Action.Ability},
		"target": map[string]any{"kind": e.Target.Kind, "ref": e.Target.Ref,
			"environment": orDefault(e.Target.RawEnvironment, e.Target.Environment)},
		"params":         orEmpty(e.Params),
		"magnitude":      e.Magnitude,
		"axes":           e.Axes,
		"approval":       map[string]any{"present": e.Approval.Present, "hold_id": nullable(e.Approval.HoldID)},
		"trajectory_ref": e.TrajectoryRef,
		"context":        e.wireContext(),
		"meta":           e.Meta,
	}
	if e.SvcVersion != "" {
		doc["svc_version"] = e.SvcVersion
	}
	for k, v := range e.Extra {
		if _, known := doc[k]; !known {
			doc[k] = v
		}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("marshal envelope: %w", err)
	}
	if _, err := ParseEnvelope(body); err != nil {
		return nil, err
	}
	return body, nil
}

// wireContext is e's context with context.mode saying e.Mode.
func (e *Envelope) wireContext() map[string]any {
	ctx := orEmpty(e.Context)
	said, _ := ctx["mode"].(string)
	if e.Mode == "" || Fold(said) == e.Mode || (e.Mode == ModeEnforce && ctx["mode"] == nil) {
		return ctx
	}
	ctx = maps.Clone(ctx)
	ctx["mode"] = e.Mode
	return ctx
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// orEmpty is m, or an empty map for nil.
func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// nullable is s, or nil (JSON null) when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
