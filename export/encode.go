package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine"
)

// entry is one event rendered for syslog: the header fields it decides and
// its MSG body.
type entry struct {
	msgID    string
	severity int
	time     time.Time
	msg      []byte
}

// encodeEntry renders a syslog-bound event in format (json or cef) as an
// MSG of at most limit octets, cutting its longest text fields to fit (see
// fit). The severity follows spec §6.1: allow 6, require_approval 4, deny 3
// (and any unknown verdict, so an oddity is never under-reported),
// lifecycle 5, kill_switch 2.
func encodeEntry(ev engine.Event, format string, limit int) (entry, error) {
	f := msgFormat{name: format, limit: limit}
	switch ev.Type {
	case engine.EventDecision:
		d, ok := bodyAs[engine.DecisionEvent](ev.Body)
		if !ok {
			return entry{}, fmt.Errorf("encode decision event: unexpected body %T", ev.Body)
		}
		return render(ev.Type, verdictSeverity(d.Verdict), d.EpochMS, d, decisionCodec, f)
	case engine.EventLifecycle:
		l, ok := bodyAs[engine.LifecycleEvent](ev.Body)
		if !ok {
			return entry{}, fmt.Errorf("encode lifecycle event: unexpected body %T", ev.Body)
		}
		return render(ev.Type, sevNotice, l.EpochMS, l, lifecycleCodec, f)
	case engine.EventKillSwitch:
		k, ok := bodyAs[engine.KillSwitchEvent](ev.Body)
		if !ok {
			return entry{}, fmt.Errorf("encode kill_switch event: unexpected body %T", ev.Body)
		}
		return render(ev.Type, sevCritical, k.EpochMS, k, killSwitchCodec, f)
	}
	return entry{}, fmt.Errorf("encode event: %q is not a syslog event", ev.Type)
}

// msgFormat is how an MSG is rendered: json or cef, in at most limit octets.
type msgFormat struct {
	name  string
	limit int
}

// codec is what render needs of one event body type: its CEF rendering and
// the text fields fit may cut in each format.
type codec[T any] struct {
	cef       func(T, int) []byte
	jsonTexts func(*T) []*string
	cefTexts  func(*T) []*string
}

// The codecs of the syslog event bodies.
var (
	decisionCodec   = codec[engine.DecisionEvent]{cef: cefDecision, jsonTexts: decisionTexts, cefTexts: decisionCEFTexts}
	lifecycleCodec  = codec[engine.LifecycleEvent]{cef: cefLifecycle, jsonTexts: lifecycleTexts, cefTexts: lifecycleTexts}
	killSwitchCodec = codec[engine.KillSwitchEvent]{cef: cefKillSwitch, jsonTexts: killSwitchTexts, cefTexts: killSwitchTexts}
)

func render[T any](msgID string, sev int, epochMS int64, body T, c codec[T], f msgFormat) (entry, error) {
	e := entry{msgID: msgID, severity: sev, time: time.UnixMilli(epochMS).UTC()}
	if epochMS == 0 {
		e.time = time.Now().UTC()
	}
	encode := func(b T) ([]byte, error) { return marshalASCII(b) }
	texts, size := c.jsonTexts, sizer(jsonSize)
	if f.name == FormatCEF {
		encode = func(b T) ([]byte, error) { return withBOM(c.cef(b, sev)), nil }
		texts, size = c.cefTexts, cefSize
	}
	msg, err := fit(body, texts, encode, size, f.limit)
	if err != nil {
		return entry{}, fmt.Errorf("encode %s event: %w", msgID, err)
	}
	e.msg = msg
	return e, nil
}

func verdictSeverity(verdict string) int {
	switch verdict {
	case engine.Allow:
		return sevInfo
	case engine.RequireApproval:
		return sevWarning
	}
	return sevError
}

// bodyAs accepts an event body given either as T or as a non-nil *T.
func bodyAs[T any](body any) (T, bool) {
	switch v := body.(type) {
	case T:
		return v, true
	case *T:
		if v != nil {
			return *v, true
		}
	}
	var zero T
	return zero, false
}

// marshalASCII renders v as compact JSON whose every non-ASCII character is
// a \u escape, so a JSON body is always plain ASCII (MSG-ANY, no BOM) and
// survives any collector's charset handling byte for byte.
func marshalASCII(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("marshal json: %w", err)
	}
	raw := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	out := make([]byte, 0, len(raw))
	for len(raw) > 0 {
		r, size := utf8.DecodeRune(raw)
		raw = raw[size:]
		if r < utf8.RuneSelf {
			out = append(out, byte(r))
			continue
		}
		out = appendJSONEscape(out, r)
	}
	return out, nil
}

// jsonSize is the size of one character inside a string of a JSON MSG
// (see sizer): encoding/json's two-octet escapes, \u00XX for other control
// characters, \ufffd for an invalid octet, and marshalASCII's \uXXXX (a
// surrogate pair beyond the Basic Multilingual Plane) for the rest of
// non-ASCII.
func jsonSize(r rune, width int) int {
	switch {
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20:
		return len(`\u0000`)
	case r < utf8.RuneSelf:
		return 1
	case r > 0xFFFF:
		return 2 * len(`\u0000`)
	}
	return len(`\u0000`)
}

// appendJSONEscape writes r as \uXXXX, or as a UTF-16 surrogate pair when r
// is outside the Basic Multilingual Plane. Outside a JSON string only ASCII
// occurs, so every non-ASCII rune is inside a string and may be escaped.
func appendJSONEscape(b []byte, r rune) []byte {
	if r > 0xFFFF {
		r -= 0x10000
		b = appendU4(b, 0xD800+(r>>10))
		return appendU4(b, 0xDC00+(r&0x3FF))
	}
	return appendU4(b, r)
}

func appendU4(b []byte, r rune) []byte {
	b = append(b, '\\', 'u')
	s := strconv.FormatInt(int64(r), 16)
	for i := len(s); i < 4; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}
