package envelope

import (
	"bytes"
	"encoding/json"
	"slices"
)

// The wire form of an envelope: the values as sent, before validation.
// The json tags name the wire keys.
type wireEnvelope struct {
	SvcVersion    *string         `json:"svc_version"`
	Agent         *wireAgent      `json:"agent"`
	Action        *wireAction     `json:"action"`
	Target        *wireTarget     `json:"target"`
	Params        json.RawMessage `json:"params"`
	Magnitude     *wireMagnitude  `json:"magnitude"`
	Axes          *wireAxes       `json:"axes"`
	Approval      *wireApproval   `json:"approval"`
	TrajectoryRef *string         `json:"trajectory_ref"`
	Context       json.RawMessage `json:"context"`
	Meta          *wireMeta       `json:"meta"`
}

type wireAgent struct {
	ID         *string `json:"id"`
	OnBehalfOf *string `json:"on_behalf_of"`
	SessionID  *string `json:"session_id"`
}

type wireAction struct {
	Namespace *string `json:"namespace"`
	Verb      *string `json:"verb"`
	Ability   *string `json:"ability"`
}

type wireTarget struct {
	Kind        *string `json:"kind"`
	Ref         *string `json:"ref"`
	Environment *string `json:"environment"`
}

type wireMagnitude struct {
	Count json.RawMessage `json:"count"`
}

type wireAxes struct {
	Reversibility *string `json:"reversibility"`
	BlastRadius   *string `json:"blast_radius"`
	Externality   *string `json:"externality"`
}

type wireApproval struct {
	Present *bool   `json:"present"`
	HoldID  *string `json:"hold_id"`
}

type wireMeta struct {
	Timestamp *string `json:"timestamp"`
	Nonce     *string `json:"nonce"`
	Signature *string `json:"signature"`
}

// extra returns copies of the unknown top-level members, or nil if there
// are none.
func (d *scanned) extra() map[string]json.RawMessage {
	var extra map[string]json.RawMessage
	for _, m := range d.members {
		if !slices.Contains(knownTopLevel, string(m.key)) {
			if extra == nil {
				extra = map[string]json.RawMessage{}
			}
			extra[string(m.key)] = bytes.Clone(m.value)
		}
	}
	return extra
}

// stringFields is how many string fields the wire form has. scanKeys
// refuses duplicate keys, so each is decoded at most once.
const stringFields = 18

// wireDecoder fills a wire form. It holds everything the form's pointers
// point to, so that decoding allocates the whole form at once.
type wireDecoder struct {
	w         wireEnvelope
	agent     wireAgent
	action    wireAction
	target    wireTarget
	magnitude wireMagnitude
	axes      wireAxes
	approval  wireApproval
	meta      wireMeta
	present   bool
	strs      []pendingString             // the decoded string fields, backed by strsBuf
	strsBuf   [stringFields]pendingString // room for every string field without allocating
	buf       []byte                      // the decoded string values, end to end
	scratch   [512]byte
}

// pendingString is a decoded string value, buf[start:end], waiting for
// its field to point at it.
type pendingString struct {
	dst        **string
	start, end int
	s          string
}

// decodeWire fills the wire form from the root members in document order.
// The first value of the wrong kind is refused as json.Unmarshal refused it.
func decodeWire(members []member) (*wireEnvelope, error) {
	d := &wireDecoder{}
	d.buf = d.scratch[:0]
	d.strs = d.strsBuf[:0]
	for _, m := range members {
		if err := d.set(m.key, m.value); err != nil {
			return nil, err
		}
	}
	d.setStrings()
	return &d.w, nil
}

// setStrings points the string fields at their values, which share one
// allocation.
func (d *wireDecoder) setStrings() {
	all := string(d.buf)
	for i := range d.strs {
		p := &d.strs[i]
		p.s = all[p.start:p.end]
		*p.dst = &p.s
	}
}

// set decodes a root member.
func (d *wireDecoder) set(key, raw []byte) error {
	w := &d.w
	switch string(key) {
	case "svc_version":
		return d.str(&w.SvcVersion, "svc_version", raw)
	case "trajectory_ref":
		return d.str(&w.TrajectoryRef, "trajectory_ref", raw)
	case "params":
		w.Params = raw
	case "context":
		w.Context = raw
	case "agent":
		return setObject(d, &w.Agent, &d.agent, "agent", raw, (*wireAgent).set)
	case "action":
		return setObject(d, &w.Action, &d.action, "action", raw, (*wireAction).set)
	case "target":
		return setObject(d, &w.Target, &d.target, "target", raw, (*wireTarget).set)
	case "magnitude":
		return setObject(d, &w.Magnitude, &d.magnitude, "magnitude", raw, (*wireMagnitude).set)
	case "axes":
		return setObject(d, &w.Axes, &d.axes, "axes", raw, (*wireAxes).set)
	case "approval":
		return setObject(d, &w.Approval, &d.approval, "approval", raw, (*wireApproval).set)
	case "meta":
		return setObject(d, &w.Meta, &d.meta, "meta", raw, (*wireMeta).set)
	}
	return nil
}

// mustBe is json.Unmarshal's type error for field, as an *InvalidEnvelope.
func mustBe(field, kind string) error {
	return &InvalidEnvelope{Field: field, Reason: "must be " + kind}
}

// setObject decodes an envelope object into obj and points *dst at it;
// null leaves it absent. set stores each member and ignores unknown keys.
func setObject[T any](d *wireDecoder, dst **T, obj *T, field string, raw []byte,
	set func(*T, *wireDecoder, []byte, []byte) error) error {
	switch raw[0] {
	case 'n':
		return nil
	case '{':
	default:
		return mustBe(field, "an object")
	}
	*dst = obj
	r := wireReader{data: raw}
	var err error
	r.members(func(key []byte) {
		if value := r.skip(); err == nil {
			err = set(obj, d, key, value)
		}
	})
	return err
}

// str decodes a string or null.
func (d *wireDecoder) str(dst **string, field string, raw []byte) error {
	switch raw[0] {
	case 'n':
		*dst = nil
	case '"':
		start := len(d.buf)
		d.buf = append(d.buf, unquote(raw[1:len(raw)-1])...)
		d.strs = append(d.strs, pendingString{dst: dst, start: start, end: len(d.buf)})
	default:
		return mustBe(field, "a string")
	}
	return nil
}

// boolean decodes a boolean or null.
func (d *wireDecoder) boolean(dst **bool, field string, raw []byte) error {
	switch raw[0] {
	case 'n':
		*dst = nil
	case 't', 'f':
		d.present = raw[0] == 't'
		*dst = &d.present
	default:
		return mustBe(field, "a boolean")
	}
	return nil
}

func (a *wireAgent) set(d *wireDecoder, key, raw []byte) error {
	switch string(key) {
	case "id":
		return d.str(&a.ID, "agent.id", raw)
	case "on_behalf_of":
		return d.str(&a.OnBehalfOf, "agent.on_behalf_of", raw)
	case "session_id":
		return d.str(&a.SessionID, "agent.session_id", raw)
	}
	return nil
}

func (a *wireAction) set(d *wireDecoder, key, raw []byte) error {
	switch string(key) {
	case "namespace":
		return d.str(&a.Namespace, "action.namespace", raw)
	case "verb":
		return d.str(&a.Verb, "action.verb", raw)
	case "ability":
		return d.str(&a.Ability, "action.ability", raw)
	}
	return nil
}

func (t *wireTarget) set(d *wireDecoder, key, raw []byte) error {
	switch string(key) {
	case "kind":
		return d.str(&t.Kind, "target.kind", raw)
	case "ref":
		return d.str(&t.Ref, "target.ref", raw)
	case "environment":
		return d.str(&t.Environment, "target.environment", raw)
	}
	return nil
}

func (m *wireMagnitude) set(_ *wireDecoder, key, raw []byte) error {
	if string(key) == "count" {
		m.Count = raw
	}
	return nil
}

func (a *wireAxes) set(d *wireDecoder, key, raw []byte) error {
	switch string(key) {
	case "reversibility":
		return d.str(&a.Reversibility, "axes.reversibility", raw)
	case "blast_radius":
		return d.str(&a.BlastRadius, "axes.blast_radius", raw)
	case "externality":
		return d.str(&a.Externality, "axes.externality", raw)
	}
	return nil
}

func (a *wireApproval) set(d *wireDecoder, key, raw []byte) error {
	switch string(key) {
	case "present":
		return d.boolean(&a.Present, "approval.present", raw)
	case "hold_id":
		return d.str(&a.HoldID, "approval.hold_id", raw)
	}
	return nil
}

func (m *wireMeta) set(d *wireDecoder, key, raw []byte) error {
	switch string(key) {
	case "timestamp":
		return d.str(&m.Timestamp, "meta.timestamp", raw)
	case "nonce":
		return d.str(&m.Nonce, "meta.nonce", raw)
	case "signature":
		return d.str(&m.Signature, "meta.signature", raw)
	}
	return nil
}
