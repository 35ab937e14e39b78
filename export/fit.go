package export

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine"
)

// DefaultMaxMessage bounds a whole SYSLOG-MSG (header and MSG, without the
// octet count of a stream frame) in octets unless SVC_SYSLOG_MAX_MESSAGE
// says otherwise. It is rsyslog's default maxMessageSize (its "8k"), within
// the 8192 octets RFC 5425 §4.3.1 asks every receiver to take. A collector
// cuts a longer message, and rsyslog parses the rest of a TCP or TLS frame
// as a message of its own, so an agent could make a long value forge a
// whole syslog message.
const DefaultMaxMessage = 8096

// MinMaxMessage and MaxMaxMessage bound SVC_SYSLOG_MAX_MESSAGE: the 2048
// octets every RFC 5425 receiver must take (an event with its text fields
// cut short still fits), and the largest UDP payload.
const (
	MinMaxMessage = 2048
	MaxMaxMessage = 65507
)

// cutMark ends a text field that was cut to fit the message size limit.
const cutMark = "…"

// fit encodes body and, while the result is longer than limit octets, cuts
// the longest of its text fields down to a common encoded size (as size
// counts it), so that short fields are left whole. Fields are cut as text,
// before encode escapes them, at a character boundary: no escape sequence
// or UTF-8 sequence is ever split. It fails only if the message is too long
// with every text field empty.
func fit[T any](body T, texts func(*T) []*string, encode func(T) ([]byte, error), size sizer, limit int) ([]byte, error) {
	for {
		msg, err := encode(body)
		if err != nil || len(msg) <= limit {
			return msg, err
		}
		if !cutLongest(texts(&body), len(msg)-limit, size) {
			return nil, fmt.Errorf("%d octets exceed the limit of %d with every text field empty", len(msg), limit)
		}
	}
}

// sizer is an encoder's size in octets of one character of a text value:
// r and width as utf8.DecodeRuneInString reads them, so an invalid octet is
// utf8.RuneError of width 1.
type sizer func(r rune, width int) int

// of is the encoded size of s, character by character.
func (size sizer) of(s string) int {
	n := 0
	for at := 0; at < len(s); {
		r, width := utf8.DecodeRuneInString(s[at:])
		n += size(r, width)
		at += width
	}
	return n
}

// cutLongest cuts every field whose encoded size is above the waterline
// for excess down to it, and reports whether it cut any. A value may be
// escaped a little differently where it stands than size counts (a CEF
// header field), so fit may need another round.
func cutLongest(fields []*string, excess int, size sizer) bool {
	sizes := make([]int, len(fields))
	for i, f := range fields {
		sizes[i] = size.of(*f)
	}
	level := waterline(sizes, excess)
	cut := false
	for i, f := range fields {
		if *f != "" && sizes[i] > level {
			*f = cutText(*f, level, size)
			cut = true
		}
	}
	return cut
}

// waterline returns the greatest size such that cutting every larger field
// to it removes at least excess octets, or 0 when even emptying every field
// does not.
func waterline(sizes []int, excess int) int {
	longest := 0
	for _, n := range sizes {
		longest = max(longest, n)
	}
	tooHigh := sort.Search(longest+1, func(level int) bool {
		removed := 0
		for _, n := range sizes {
			removed += max(n-level, 0)
		}
		return removed < excess
	})
	return max(tooHigh-1, 0)
}

// cutText returns the longest prefix of s that, followed by cutMark,
// encodes in at most n octets, or "" when not even cutMark fits. It cuts at
// a character boundary, so a valid UTF-8 sequence is never split; an
// invalid octet counts as a character of its own, which the encoders
// replace with U+FFFD. s itself must encode in more than n octets.
func cutText(s string, n int, size sizer) string {
	room := n - size.of(cutMark)
	if room < 0 {
		return ""
	}
	for at := 0; ; {
		r, width := utf8.DecodeRuneInString(s[at:])
		if room -= size(r, width); room < 0 {
			return s[:at] + cutMark
		}
		at += width
	}
}

// decisionTexts are the free-text fields of a decision that fit may cut:
// what the agent or the policy wrote. Ids, hashes, enums, numbers and the
// version are never cut.
func decisionTexts(d *engine.DecisionEvent) []*string {
	return append(decisionCEFTexts(d), &d.RawVerb, &d.Ability, &d.RawEnvironment, &d.ShadowReason)
}

// decisionCEFTexts are those of decisionTexts that a CEF record carries.
func decisionCEFTexts(d *engine.DecisionEvent) []*string {
	return []*string{
		&d.RuleID, &d.Verb, &d.SessionID, &d.AgentID, &d.OnBehalfOf, &d.Environment, &d.Reason, &d.Traceparent,
		&d.Gate, &d.ShadowRule,
	}
}

// lifecycleTexts is empty: a lifecycle event carries no free text, in any
// format.
func lifecycleTexts(*engine.LifecycleEvent) []*string { return nil }

// killSwitchTexts are the free-text fields of a kill_switch event, in JSON
// and in CEF.
func killSwitchTexts(k *engine.KillSwitchEvent) []*string { return []*string{&k.Reason, &k.By} }
