package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Verdicts a decision can carry. Precedence is deny > require_approval > allow.
const (
	Allow           = "allow"
	Deny            = "deny"
	RequireApproval = "require_approval"
)

// Rule identifiers the engine itself produces (policy rules come from Rego).
const (
	RuleInternalError        = "svc.core/internal_error"
	RuleInvalidRequest       = "svc.core/invalid_request"
	RuleHoldCreationFailed   = "svc.core/hold_creation_failed"
	RuleHoldNotRedeemable    = "svc.core/hold_not_redeemable"
	RuleApprovedResubmission = "svc.policy/approved_resubmission"
)

// RuleTerminal is the policy rule that is a deny, never a hold (spec §2.2:
// irreversible_systemic_prod). A require_approval a policy answers under it
// is denied, since no approval could ever lift it.
const RuleTerminal = "svc.policy/irreversible_systemic_prod"

// Reason codes of a refused re-submission (spec §3, §7).
const (
	ReasonHoldNotFound         = "svc_hold_not_found"
	ReasonHoldNotApproved      = "svc_hold_not_approved"
	ReasonHoldExpired          = "svc_hold_expired"
	ReasonHoldConsumed         = "svc_hold_consumed"
	ReasonHoldEnvelopeMismatch = "svc_hold_envelope_mismatch"
	ReasonHoldActorMismatch    = "svc_hold_actor_mismatch"
)

// Decision is the response body of POST /v1/decide (spec §2.2). Beside the
// fields of the spec it carries the envelope hash and the canonical and raw
// verb and environment the policy saw, so an adapter can log what was decided.
type Decision struct {
	Decision         string   `json:"decision"`
	Reason           string   `json:"reason"`
	Detail           string   `json:"detail,omitempty"`
	Rule             string   `json:"rule"`
	Obligations      []string `json:"obligations"`
	Modulation       any      `json:"modulation"`
	DecisionID       string   `json:"decision_id"`
	HoldID           string   `json:"hold_id,omitempty"`
	ExpiresTS        string   `json:"expires_ts,omitempty"`
	ParentDecisionID string   `json:"parent_decision_id,omitempty"`
	EnvelopeHash     string   `json:"envelope_hash,omitempty"`
	Verb             string   `json:"verb,omitempty"`
	RawVerb          string   `json:"raw_verb,omitempty"`
	Environment      string   `json:"environment,omitempty"`
	RawEnvironment   string   `json:"raw_environment,omitempty"`
}

// Verdict is what a policy evaluation returns: the decision, the rule that
// fired, a human-readable reason, the obligations the adapter must honour,
// and the verdict its observed rules would have given (Shadow, nil when they
// change nothing).
type Verdict struct {
	Decision    string   `json:"decision"`
	Rule        string   `json:"rule"`
	Reason      string   `json:"reason"`
	Obligations []string `json:"obligations,omitempty"`
	Shadow      *Verdict `json:"shadow,omitempty"`
}

// Valid reports whether the verdict names a known decision and a rule.
func (v Verdict) Valid() bool {
	switch v.Decision {
	case Allow, Deny, RequireApproval:
		return v.Rule != ""
	}
	return false
}

// Obligations svc documents (docs/policy.md, "Obligations"): the closed set
// every adapter svc ships understands. An adapter that meets any other
// refuses the action (fail closed).
const (
	// ObligationNotify: tell the principal the agent acts for (or the
	// operator's channel) that the action ran, after running it.
	ObligationNotify = "notify"
	// ObligationLogParams: write the action's full params to the adapter's
	// own log before running it.
	ObligationLogParams = "log_params"
)

// KnownObligations are the obligations of the closed set.
var KnownObligations = []string{ObligationLogParams, ObligationNotify}

// UnknownObligations returns the obligations of obligations outside the
// closed set, in order.
func UnknownObligations(obligations []string) []string {
	var unknown []string
	for _, o := range obligations {
		if !slices.Contains(KnownObligations, o) {
			unknown = append(unknown, o)
		}
	}
	return unknown
}

// Bounds of a verdict's obligations.
const (
	maxObligations     = 16
	maxObligationBytes = 64
)

// FormatTime renders t as RFC 3339 UTC with millisecond precision, the one
// timestamp format of every svc document.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// verdictMembers are the members of a verdict, spelled as svc reads them:
// decision, rule and reason are required, obligations and shadow optional.
var verdictMembers = [...]string{"decision", "rule", "reason", "obligations", "shadow"}

// verdictOf decodes a decision document and checks it is a valid verdict.
// Member names are matched exactly: a member that spells one of
// verdictMembers another way, or repeats one, makes the document malformed.
func verdictOf(value json.RawMessage) (Verdict, error) {
	v, err := verdictFields(value)
	if err != nil {
		return Verdict{}, err
	}
	if v.Shadow != nil && v.Shadow.Shadow != nil {
		return Verdict{}, fmt.Errorf("policy decision %q: a shadow verdict has no shadow of its own", opaSnippet(value))
	}
	return v, nil
}

func verdictFields(value json.RawMessage) (Verdict, error) {
	var members [len(verdictMembers)]json.RawMessage
	if err := exactMembers(value, verdictMembers[:], members[:]); err != nil {
		return Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %w", opaSnippet(value), err)
	}
	var fields [3]string
	for i, m := range members[:3] {
		if m == nil || string(m) == "null" {
			return Verdict{}, fmt.Errorf("policy decision %q lacks decision, rule or reason", opaSnippet(value))
		}
		var ok bool
		if fields[i], ok = jsonString(m); !ok {
			return Verdict{}, fmt.Errorf("policy decision %q is not an object of strings: %s is %s",
				opaSnippet(value), verdictMembers[i], opaSnippet(m))
		}
	}
	v := Verdict{Decision: fields[0], Rule: fields[1], Reason: fields[2]}
	if !v.Valid() {
		return Verdict{}, fmt.Errorf("policy verdict is invalid: decision %q, rule %q", v.Decision, v.Rule)
	}
	var err error
	if v.Obligations, err = obligationsOf(members[3]); err != nil {
		return Verdict{}, fmt.Errorf("policy decision %q: %w", opaSnippet(value), err)
	}
	if m := members[4]; m != nil && string(m) != "null" {
		shadow, err := verdictFields(m)
		if err != nil {
			return Verdict{}, fmt.Errorf("shadow: %w", err)
		}
		v.Shadow = &shadow
	}
	return v, nil
}

// obligationsOf reads a verdict's obligations: absent or null is none; else
// an array of at most maxObligations distinct non-empty strings of at most
// maxObligationBytes each. Unknown names are kept: the adapters refuse them.
func obligationsOf(m json.RawMessage) ([]string, error) {
	if m == nil || string(m) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(m, &list); err != nil {
		return nil, fmt.Errorf("obligations must be an array of strings, got %s", opaSnippet(m))
	}
	if len(list) > maxObligations {
		return nil, fmt.Errorf("at most %d obligations, got %d", maxObligations, len(list))
	}
	for i, o := range list {
		if o == "" || len(o) > maxObligationBytes || slices.Contains(list[:i], o) {
			return nil, fmt.Errorf("obligation %q must be a distinct non-empty string of at most %d bytes", o, maxObligationBytes)
		}
	}
	return list, nil
}

// jsonString decodes value, a valid JSON value, if it is a string.
func jsonString(value json.RawMessage) (string, bool) {
	if value[0] != '"' {
		return "", false
	}
	if inner := value[1 : len(value)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(value, &s) == nil
}

// errNotObject is the refusal of a document that is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// exactMembers reads the object doc (null reads as an object without
// members: OPA writes an undefined document as null, which the verdict
// readers take for one without the members they look for) and sets
// values[i] to the value of its member names[i], or nil when it has none,
// with objectScanner.match.
func exactMembers(doc []byte, names []string, values []json.RawMessage) error {
	s, err := scanMembers(doc, true)
	if err != nil {
		return err
	}
	return s.match(names, values)
}

// match reads the members left to s and sets values[i], nil on entry, to
// the value of its member names[i], or leaves it nil when it has none. Names are matched
// exactly, unlike encoding/json, which also matches a name in another case
// or under Unicode folding ("Decision", "deciſion") and keeps the last of
// duplicates. So a member that appears twice, or spells one of names
// another way (see spelledName), is refused with a *memberFault: two
// readers could disagree on the document. Other members are ignored.
func (s *objectScanner) match(names []string, values []json.RawMessage) error {
	var array [8][]byte // a verdict has three members: no allocation on the decision path
	keys := array[:0]
	var seen keySet
	for quoted, value, ok := s.next(); ok; quoted, value, ok = s.next() {
		key := memberName(quoted)
		i := nameIndex(key, names)
		var dup bool
		keys, dup = seen.add(keys, key)
		switch {
		case dup:
			f := &memberFault{twice: true}
			if i >= 0 {
				f.name = names[i]
			}
			return f
		case i >= 0:
			values[i] = value
		default:
			if name, ok := spelledName(key, names); ok {
				return &memberFault{key: string(key), name: name}
			}
		}
	}
	return nil
}

// MemberNames returns the member names of the JSON object doc in document
// order, escapes decoded as encoding/json decodes them, duplicates kept:
// what decoding into a map hides. A doc that is not exactly one JSON
// object, null included, is refused with an error saying it is not a JSON
// object.
func MemberNames(doc []byte) ([]string, error) {
	s, err := scanObject(doc)
	if err != nil {
		return nil, err
	}
	var names []string
	for quoted, _, ok := s.next(); ok; quoted, _, ok = s.next() {
		names = append(names, string(memberName(quoted)))
	}
	return names, nil
}

// memberFault is why match refused a document: a member that
// appears twice (name is the one of its names, "" for another member, whose
// name is not repeated here: it may be anything a sender wrote), or key,
// which spells name another way.
type memberFault struct {
	key, name string
	twice     bool
}

// Error names the member at fault.
func (f *memberFault) Error() string {
	switch {
	case f.twice && f.name == "":
		return "a member appears twice"
	case f.twice:
		return fmt.Sprintf("member %q appears twice", f.name)
	}
	return fmt.Sprintf("member %q spells %q another way", f.key, f.name)
}

// memberName decodes a member's quoted key as encoding/json does: escapes
// decoded, invalid UTF-8 read as U+FFFD.
func memberName(quoted []byte) []byte {
	if inner := quoted[1 : len(quoted)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	key, _ := jsonString(quoted) // a valid JSON string always decodes
	return []byte(key)
}

// nameIndex returns the index of key in names, or -1.
func nameIndex(key []byte, names []string) int {
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	return -1
}

// spelledName returns the one of names (lower-case ASCII names) that key,
// none of them, reads as (misspelling), compared once Folded: compatibility
// forms such as full-width letters, invisible characters and look-alikes
// removed.
func spelledName(key []byte, names []string) (string, bool) {
	if lowerASCII(key) {
		return "", false
	}
	k := string(key)
	return misspelling(k, Fold(k), names)
}

// objectScanner walks the members of a JSON object that json.Valid has
// accepted, so it needs no error checks of its own.
type objectScanner struct {
	data []byte
	pos  int
}

// scanObject checks that doc is one JSON value, an object, and returns a
// scanner of its members.
func scanObject(doc []byte) (objectScanner, error) {
	return scanMembers(doc, false)
}

// scanMembers checks that doc is one JSON value, an object or, when null is
// set, null, which reads as an object without members; and returns a
// scanner of its members.
func scanMembers(doc []byte, null bool) (objectScanner, error) {
	if !json.Valid(doc) {
		return objectScanner{}, errNotObject
	}
	s := objectScanner{data: doc}
	s.space()
	switch {
	case doc[s.pos] == '{':
		s.pos++
	case null && doc[s.pos] == 'n':
		s.pos = len(doc)
	default:
		return objectScanner{}, errNotObject
	}
	return s, nil
}

// next returns the quoted key and the value of the next member, both as
// they stand in the document; ok is false past the last one.
func (s *objectScanner) next() (key, value []byte, ok bool) {
	s.space()
	if s.pos >= len(s.data) || s.data[s.pos] == '}' {
		return nil, nil, false
	}
	if s.data[s.pos] == ',' {
		s.pos++
		s.space()
	}
	start := s.pos
	s.skipString()
	key = s.data[start:s.pos]
	s.space()
	s.pos++ // the colon
	s.space()
	start = s.pos
	s.skipValue()
	return key, s.data[start:s.pos], true
}

// space skips JSON white space.
func (s *objectScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// skipString moves past the string that starts at pos.
func (s *objectScanner) skipString() {
	for s.pos++; s.data[s.pos] != '"'; s.pos++ {
		if s.data[s.pos] == '\\' {
			s.pos++
		}
	}
	s.pos++
}

// skipValue moves past the value that starts at pos.
func (s *objectScanner) skipValue() {
	depth := 0
	for {
		switch s.data[s.pos] {
		case '"':
			s.skipString()
		case '{', '[':
			depth++
			s.pos++
		case '}', ']':
			depth--
			s.pos++
		default:
			if depth == 0 {
				s.skipScalar()
				return
			}
			s.pos++
		}
		if depth == 0 {
			return
		}
	}
}

// skipScalar moves past the number, true, false or null that starts at pos.
func (s *objectScanner) skipScalar() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return
		}
		s.pos++
	}
}
