package export

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine"
)

// CEF header constants (spec §6.5): CEF:0|<vendor>|<product>|<version>|...
const (
	cefVendor  = "svc"
	cefProduct = "svc"
)

// cefSeverity maps a syslog severity (0 emergency … 7 debug) onto CEF's
// 0-10 scale (0-3 low, 4-6 medium, 7-8 high, 9-10 very high): allow (6) → 1,
// lifecycle (5) → 3, require_approval (4) → 5, deny (3) → 7,
// kill_switch (2) → 9, and alert/emergency → 10.
func cefSeverity(syslogSeverity int) int {
	switch syslogSeverity {
	case 0, 1:
		return 10
	case 2:
		return 9
	case 3:
		return 7
	case 4:
		return 5
	case 5:
		return 3
	case 6:
		return 1
	}
	return 0
}

// cefMessage builds one CEF record. Header fields and extension values are
// escaped as they are added, so no value can end its field early or forge
// another field or key.
type cefMessage struct {
	b       strings.Builder
	hasExts bool
}

func newCEF(version, signatureID, name string, syslogSeverity int) *cefMessage {
	m := &cefMessage{}
	m.b.WriteString("CEF:0")
	for _, f := range []string{cefVendor, cefProduct, version, signatureID, name} {
		m.b.WriteByte('|')
		writeCEFHeader(&m.b, f)
	}
	m.b.WriteByte('|')
	m.b.WriteString(strconv.Itoa(cefSeverity(syslogSeverity)))
	m.b.WriteByte('|')
	return m
}

// ext adds key=value, escaped; an empty value adds nothing, so optional
// fields appear only when they apply.
func (m *cefMessage) ext(key, value string) *cefMessage {
	if value == "" {
		return m
	}
	if m.hasExts {
		m.b.WriteByte(' ')
	}
	m.hasExts = true
	m.b.WriteString(key)
	m.b.WriteByte('=')
	writeCEFValue(&m.b, value)
	return m
}

// labelled adds a custom field and its label (e.g. cs1=… cs1Label=…).
func (m *cefMessage) labelled(key, label, value string) *cefMessage {
	if value == "" {
		return m
	}
	return m.ext(key, value).ext(key+"Label", label)
}

func (m *cefMessage) bytes() []byte { return []byte(m.b.String()) }

// writeCEFHeader escapes a header field: '\' → "\\", '|' → "\|". CEF has no
// escape for line breaks in the header, so CR, LF and every other character
// of isBlanked become a space; invalid UTF-8 becomes U+FFFD.
func writeCEFHeader(b *strings.Builder, v string) {
	for _, r := range strings.ToValidUTF8(v, "\uFFFD") {
		switch {
		case r == '\\' || r == '|':
			b.WriteByte('\\')
			b.WriteRune(r)
		case isBlanked(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
}

// writeCEFValue escapes an extension value: '\' → "\\", '=' → "\=",
// LF → "\n", CR → "\r"; the other characters of isBlanked become a space and
// invalid UTF-8 becomes U+FFFD. '|' needs no escape in extensions.
func writeCEFValue(b *strings.Builder, v string) {
	for _, r := range strings.ToValidUTF8(v, "\uFFFD") {
		switch {
		case r == '\\' || r == '=':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case isBlanked(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
}

// cefSize is the size of one character in a CEF extension value (see
// sizer), as writeCEFValue writes it. An invalid octet counts as a whole
// U+FFFD, though a run of them becomes a single one: an overestimate.
func cefSize(r rune, width int) int {
	switch {
	case r == '\\' || r == '=' || r == '\n' || r == '\r':
		return 2
	case isBlanked(r):
		return 1
	case r == utf8.RuneError && width == 1:
		return utf8.RuneLen(utf8.RuneError)
	}
	return width
}

// isBlanked reports whether r is written as a space in CEF: a C0 or C1
// control character (NEL U+0085 included), DEL, or the Unicode line and
// paragraph separators U+2028 and U+2029, which a reader may take for a
// line break and so for the end of the record.
func isBlanked(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// cefDecision renders a decision event with the extensions of spec §6.5.
func cefDecision(d engine.DecisionEvent, sev int) []byte {
	return newCEF(d.SvcVersion, d.RuleID, d.Verdict, sev).
		ext("rt", strconv.FormatInt(d.EpochMS, 10)).
		ext("act", d.Verb).
		ext("suser", d.OnBehalfOf).
		labelled("cs1", "session_id", d.SessionID).
		labelled("cs2", "agent_id", d.AgentID).
		labelled("cs3", "reversibility", d.Axes.Reversibility).
		labelled("cs4", "blast_radius", d.Axes.BlastRadius).
		labelled("cs5", "externality", d.Axes.Externality).
		labelled("cs6", "environment", d.Environment).
		labelled("cn1", "magnitude_count", strconv.FormatInt(d.MagnitudeCount, 10)).
		labelled("cn2", "decision_latency_ms", strconv.FormatInt(d.DecisionLatencyMS, 10)).
		ext("msg", d.Reason).
		labelled("flexString1", "mode", d.Mode).
		labelled("flexString2", "gate", d.Gate).
		ext("externalId", d.DecisionID).
		ext("envelopeHash", d.EnvelopeHash).
		ext("holdId", d.HoldID).
		ext("parentDecisionId", d.ParentDecisionID).
		ext("traceparent", d.Traceparent).
		ext("shadowVerdict", d.ShadowVerdict).
		ext("shadowRule", d.ShadowRule).
		bytes()
}

// cefLifecycle renders a lifecycle event: signature id "lifecycle", name the
// action (start or stop).
func cefLifecycle(l engine.LifecycleEvent, sev int) []byte {
	return newCEF(l.SvcVersion, engine.EventLifecycle, l.Action, sev).
		ext("rt", strconv.FormatInt(l.EpochMS, 10)).
		ext("act", l.Action).
		bytes()
}

// cefKillSwitch renders a kill_switch event: signature id "kill_switch",
// name the action (flipped, cleared or queried), the freeze state in cs1.
func cefKillSwitch(k engine.KillSwitchEvent, sev int) []byte {
	return newCEF(k.SvcVersion, engine.EventKillSwitch, k.Action, sev).
		ext("rt", strconv.FormatInt(k.EpochMS, 10)).
		ext("act", k.Action).
		ext("suser", k.By).
		labelled("cs1", "frozen", strconv.FormatBool(k.Frozen)).
		ext("msg", k.Reason).
		bytes()
}
