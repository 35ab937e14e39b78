package export

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// Header fields of the messages framed by frameEvent.
const (
	testHostname = "gw-1.example.com"
	testProcID   = "4242"
)

type hostileText struct{ name, value string }

// hostileTexts are values an agent or an approver can put in a text field,
// each trying to end its field, its message or its line early.
func hostileTexts() []hostileText {
	return []hostileText{
		{"LF forging a message", "x\n<130>1 2026-01-02T03:04:05.123000Z evil svc 1 kill_switch - forged"},
		{"CR", "x\ry"},
		{"CRLF", "x\r\ny"},
		{"NEL", "x\u0085y"},
		{"LS", "x\u2028y"},
		{"PS", "x\u2029y"},
		{"NUL and controls", "x\x00\x01\x1b[31m\x7fy"},
		{"JSON quote and backslash", `x","verdict":"allow","y":"\`},
		{"CEF header pipe", `x|CEF:0|evil|evil|1|forged|allow|1|`},
		{"CEF extension key", `x act=forged cs1=forged\`},
		{"CEF escaped equals", `x\=y\\=z`},
		{"SD-PARAM specials", `x"]\[sd@1 a="b"]`},
		{"trailing backslash", `x\`},
		{"invalid UTF-8", "x\xff\xfe\xc3y\xe6\x97"},
		{"BOM", "\uFEFFx"},
		{"astral", "🚀x"},
		{"NILVALUE and spaces", "- - - -"},
	}
}

// withText returns d with v in every string field.
func withText(d engine.DecisionEvent, v string) engine.DecisionEvent {
	for _, f := range []*string{
		&d.Verdict, &d.RuleID, &d.Verb, &d.RawVerb, &d.Ability, &d.Axes.Reversibility, &d.Axes.BlastRadius,
		&d.Axes.Externality, &d.SessionID, &d.AgentID, &d.OnBehalfOf, &d.Environment, &d.RawEnvironment,
		&d.Mode, &d.Reason, &d.SvcVersion, &d.DecisionID, &d.EnvelopeHash, &d.HoldID, &d.ParentDecisionID,
		&d.Traceparent, &d.Gate,
	} {
		*f = v
	}
	return d
}

// frameEvent encodes ev and frames it as the syslog sink does, and returns
// the SYSLOG-MSG and its MSG.
func frameEvent(t *testing.T, ev engine.Event, format string) (msg, body []byte) {
	t.Helper()
	e, err := encodeEntry(ev, format, msgLimit(DefaultMaxMessage, testHostname, testProcID))
	require.NoError(t, err)
	msg = appendMessage(nil, header{
		facility: 16, severity: e.severity, time: e.time, hostname: testHostname,
		appName: appName, procID: testProcID, msgID: e.msgID,
	}, e.msg)
	return msg, e.msg
}

// assertOneMessage checks that msg is one well-formed RFC 5424 message of
// at most DefaultMaxMessage octets, valid UTF-8, without a line break of any kind
// or a NUL that a collector could split it at.
func assertOneMessage(t *testing.T, msg []byte) {
	t.Helper()
	assertRFC5424(t, msg)
	assert.LessOrEqual(t, len(msg), DefaultMaxMessage)
	require.True(t, utf8.Valid(msg), "valid UTF-8")
	for i, r := range string(msg) {
		switch r {
		case '\n', '\r', '\x00', '\u0085', '\u2028', '\u2029':
			t.Fatalf("line break or NUL %U at octet %d of %q", r, i, msg)
		}
	}
}

// TestHostileTextStaysInItsField frames decision and kill_switch events
// with a hostile value in every string field, in both formats, and checks
// that each is one well-formed message on one line whose MSG reads back
// every value in its own field.
func TestHostileTextStaysInItsField(t *testing.T) {
	for _, h := range hostileTexts() {
		d := withText(fullDecision(), h.value)
		k := killSwitchFlipped()
		k.Reason, k.By = h.value, h.value
		for _, format := range []string{FormatJSON, FormatCEF} {
			t.Run(h.name+"/"+format, func(t *testing.T) {
				for _, ev := range []engine.Event{{Type: engine.EventDecision, Body: d}, {Type: engine.EventKillSwitch, Body: k}} {
					msg, body := frameEvent(t, ev, format)
					assertOneMessage(t, msg)
					assertBodyReadsBack(t, ev, format, body)
				}
			})
		}
	}
}

// assertBodyReadsBack decodes an MSG as a SIEM would and compares every
// field with the event's, as the format can carry it.
func assertBodyReadsBack(t *testing.T, ev engine.Event, format string, body []byte) {
	t.Helper()
	if format == FormatJSON {
		assertASCII(t, body)
		var got map[string]any
		require.NoError(t, json.Unmarshal(body, &got))
		assert.Equal(t, mustJSON(t, ev.Body), got)
		return
	}
	text, _ := stripBOM(string(body))
	hdr, ext, err := parseCEF(text)
	require.NoError(t, err)
	switch b := ev.Body.(type) {
	case engine.DecisionEvent:
		assert.Equal(t, []string{headerText(b.SvcVersion), headerText(b.RuleID), headerText(b.Verdict)}, hdr[3:6])
		assert.Equal(t, expectedExtensions(b), ext)
	case engine.KillSwitchEvent:
		assert.Equal(t, []string{"kill_switch", "flipped"}, hdr[4:6])
		assert.Equal(t, map[string]string{
			"rt": "1767323045123", "act": "flipped", "suser": extText(b.By),
			"cs1": "true", "cs1Label": "frozen", "msg": extText(b.Reason),
		}, ext)
	}
}

// TestOversizedEventIsCutToFit: agent fields at their 4 KiB limit, in
// characters that escaping multiplies, must still yield one message within
// DefaultMaxMessage, its longest text fields cut at a character boundary (never
// mid-escape or mid-UTF-8) and marked, everything else whole.
func TestOversizedEventIsCutToFit(t *testing.T) {
	const kib4 = 4096
	tests := []struct {
		name string
		set  func(d *engine.DecisionEvent)
	}{
		{"every agent field at the limit", func(d *engine.DecisionEvent) {
			for _, f := range []*string{&d.SessionID, &d.AgentID, &d.OnBehalfOf, &d.Ability, &d.RawVerb, &d.RawEnvironment} {
				*f = strings.Repeat("a", kib4)
			}
			d.Traceparent = strings.Repeat("t", 512)
		}},
		{"control characters escaped sixfold", func(d *engine.DecisionEvent) {
			d.RawVerb, d.RawEnvironment = strings.Repeat("\x01", kib4), strings.Repeat("\x1f", kib4)
		}},
		{"backslashes and equals signs", func(d *engine.DecisionEvent) {
			d.AgentID, d.OnBehalfOf, d.SessionID = strings.Repeat(`\`, kib4), strings.Repeat("=", kib4), strings.Repeat(`a\`, kib4/2)
		}},
		{"line breaks", func(d *engine.DecisionEvent) {
			d.AgentID, d.OnBehalfOf, d.RawVerb = strings.Repeat("\r\n", kib4/2), strings.Repeat("\u2028", kib4/3), strings.Repeat("\u0085", kib4/2)
		}},
		{"multi-octet characters", func(d *engine.DecisionEvent) {
			d.AgentID, d.SessionID, d.OnBehalfOf = strings.Repeat("日", kib4/3), strings.Repeat("🚀", kib4/4), strings.Repeat("é", kib4/2)
		}},
		{"invalid UTF-8", func(d *engine.DecisionEvent) {
			d.AgentID, d.SessionID = strings.Repeat("\xff", kib4), strings.Repeat("\xe6\x97", kib4/2)
		}},
		{"one long reason", func(d *engine.DecisionEvent) { d.Reason = strings.Repeat("reason ", 3000) }},
		{"one long gate", func(d *engine.DecisionEvent) { d.Gate = strings.Repeat("g", 3*kib4) }},
	}
	for _, tt := range tests {
		d := fullDecision()
		tt.set(&d)
		for _, format := range []string{FormatJSON, FormatCEF} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				msg, body := frameEvent(t, engine.Event{Type: engine.EventDecision, Body: d}, format)
				assertOneMessage(t, msg)
				cut := assertWholeOrCut(t, d, format, body)
				if len(uncut(t, d, format)) > msgLimit(DefaultMaxMessage, testHostname, testProcID) {
					assert.Positive(t, cut, "the event did not fit whole, so some field was cut")
				}
			})
		}
	}
}

// TestOversizedEventFitsTheSmallestLimit: with SVC_SYSLOG_MAX_MESSAGE at
// its minimum, the largest event an agent can cause still fits, in both
// formats, under the longest header.
func TestOversizedEventFitsTheSmallestLimit(t *testing.T) {
	d := fullDecision()
	for _, f := range []*string{&d.SessionID, &d.AgentID, &d.OnBehalfOf, &d.Ability, &d.RawVerb, &d.RawEnvironment} {
		*f = strings.Repeat("\x01", 4096)
	}
	d.Reason = strings.Repeat("reason ", 3000)
	d.Gate = strings.Repeat("g", 4096)
	for _, format := range []string{FormatJSON, FormatCEF} {
		t.Run(format, func(t *testing.T) {
			e, err := encodeEntry(engine.Event{Type: engine.EventDecision, Body: d}, format,
				msgLimit(MinMaxMessage, testHostname, testProcID))
			require.NoError(t, err)
			msg := appendMessage(nil, header{facility: 23, severity: 7, time: e.time, hostname: testHostname,
				appName: appName, procID: testProcID, msgID: strings.Repeat("x", maxMsgID)}, e.msg)
			assert.LessOrEqual(t, len(msg), MinMaxMessage)
			assert.True(t, strings.Contains(string(e.msg), cutMark) || strings.Contains(string(e.msg), `\u2026`),
				"fields were cut and marked")
		})
	}
}

// assertWholeOrCut decodes an MSG and checks each field against d: whole,
// or (a text field only) a prefix of it followed by cutMark. It returns how
// many fields were cut.
func assertWholeOrCut(t *testing.T, d engine.DecisionEvent, format string, body []byte) int {
	t.Helper()
	want, got := mustJSON(t, d), map[string]any{}
	if format == FormatCEF {
		text, _ := stripBOM(string(body))
		_, ext, err := parseCEF(text)
		require.NoError(t, err)
		want, got = anyMap(expectedExtensions(d)), anyMap(ext)
	} else {
		require.NoError(t, json.Unmarshal(body, &got))
	}
	cut := 0
	for key, w := range want {
		switch g := got[key]; {
		case assert.ObjectsAreEqual(w, g):
		case isCutOf(g, w):
			cut++
		default:
			t.Errorf("%s: got %q, want %q or a prefix of it ending in %q", key, g, w, cutMark)
		}
	}
	for _, key := range []string{"decision_id", "envelope_hash", "hold_id", "parent_decision_id", "externalId", "envelopeHash", "holdId", "parentDecisionId"} {
		assert.Equal(t, want[key], got[key], "%s is never cut", key)
	}
	return cut
}

// uncut is d's MSG with no field cut.
func uncut(t *testing.T, d engine.DecisionEvent, format string) []byte {
	t.Helper()
	if format == FormatCEF {
		return withBOM(cefDecision(d, verdictSeverity(d.Verdict)))
	}
	msg, err := marshalASCII(d)
	require.NoError(t, err)
	return msg
}

func isCutOf(got, want any) bool {
	g, ok := got.(string)
	w, isText := want.(string)
	prefix, marked := strings.CutSuffix(g, cutMark)
	return ok && isText && marked && strings.HasPrefix(w, prefix)
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// FuzzOversizedValue: any value, repeated to the 4 KiB envelope limit in
// several fields, yields one message within DefaultMaxMessage whose fields read
// back whole or cut.
func FuzzOversizedValue(f *testing.F) {
	for _, h := range hostileTexts() {
		f.Add(h.value)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return
		}
		d := fullDecision()
		v := strings.Repeat(s, 4096/len(s)+1)[:4096]
		d.AgentID, d.SessionID, d.OnBehalfOf, d.Reason = v, v, v, v
		for _, format := range []string{FormatJSON, FormatCEF} {
			msg, body := frameEvent(t, engine.Event{Type: engine.EventDecision, Body: d}, format)
			assertOneMessage(t, msg)
			assertWholeOrCut(t, d, format, body)
		}
	})
}

// TestSizersMatchEncoders: the per-character sizes fit plans its cuts with
// are what marshalASCII and writeCEFValue write, for every character of the
// Basic Multilingual Plane, a sample beyond it and each invalid octet.
func TestSizersMatchEncoders(t *testing.T) {
	var chars []string
	for r := rune(0); r <= 0xFFFF; r++ {
		chars = append(chars, string(r))
	}
	for r := rune(0x10000); r <= utf8.MaxRune; r += 0x3FF {
		chars = append(chars, string(r))
	}
	for b := 0x80; b <= 0xFF; b++ {
		chars = append(chars, string([]byte{byte(b)}))
	}
	for _, c := range chars {
		r, width := utf8.DecodeRuneInString(c)
		js, err := marshalASCII(c)
		require.NoError(t, err)
		require.Equal(t, len(js)-len(`""`), jsonSize(r, width), "JSON size of %q", c)
		var cef strings.Builder
		writeCEFValue(&cef, c)
		require.Equal(t, cef.Len(), cefSize(r, width), "CEF size of %q", c)
	}
}

func TestCutText(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{name: "room for the mark only", in: "abcdef", n: 3, want: cutMark},
		{name: "ascii", in: "abcdefgh", n: 6, want: "abc" + cutMark},
		{name: "never splits a character", in: "日本語", n: 8, want: "日" + cutMark},
		{name: "never splits a surrogate-pair character", in: "🚀🚀", n: 6, want: cutMark},
		{name: "invalid octets are characters", in: "\xff\xfe\xfd\xfc\xfb", n: 4, want: "\xff" + cutMark},
		{name: "no room for a character", in: "日本語", n: 5, want: cutMark},
		{name: "no room for the mark", in: "abcdef", n: 2, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cutText(tt.in, tt.n, func(_ rune, width int) int { return width })
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), tt.n)
		})
	}
}

// TestFitSharesTheCut: the longest fields are cut to a common length and
// short fields stay whole.
func TestFitSharesTheCut(t *testing.T) {
	d := fullDecision()
	d.AgentID, d.SessionID = strings.Repeat("a", 4000), strings.Repeat("s", 3000)
	e, err := encodeEntry(engine.Event{Type: engine.EventDecision, Body: d}, FormatJSON, 4000)
	require.NoError(t, err)
	require.LessOrEqual(t, len(e.msg), 4000)
	var got engine.DecisionEvent
	require.NoError(t, json.Unmarshal(e.msg, &got))
	assert.Equal(t, len(got.AgentID), len(got.SessionID), "cut to the same length")
	assert.True(t, strings.HasSuffix(got.AgentID, cutMark))
	assert.Equal(t, d.OnBehalfOf, got.OnBehalfOf)
	assert.Equal(t, d.Reason, got.Reason)
}

func TestFitFailsWhenHeadersAloneAreTooLong(t *testing.T) {
	_, err := encodeEntry(engine.Event{Type: engine.EventLifecycle, Body: lifecycleStart()}, FormatCEF, 10)
	require.ErrorContains(t, err, "encode lifecycle event")
}

// forgeryAt returns a decision whose agent id puts a complete kill_switch
// message of the given facility at octet offset of the SYSLOG-MSG the sink
// would frame, were the event not cut to fit.
func forgeryAt(t *testing.T, format string, facility, offset int) engine.DecisionEvent {
	t.Helper()
	const mark = "@@"
	d := minimalDecision()
	d.AgentID = mark
	body := uncut(t, d, format)
	hostname := string(appendField(nil, mustHostname(t), maxHostname))
	msg := appendMessage(nil, header{
		facility: facility, severity: sevInfo, time: time.UnixMilli(testEpochMS), hostname: hostname,
		appName: appName, procID: strconv.Itoa(os.Getpid()), msgID: engine.EventDecision,
	}, body)
	at := strings.Index(string(msg), mark)
	require.Less(t, at, offset)
	forged := fmt.Sprintf("<%d>1 2026-01-02T03:04:05.123000Z %s svc 1 kill_switch - FORGED", facility*8+sevCritical, hostname)
	d.AgentID = strings.Repeat("A", offset-at) + forged + strings.Repeat("Z", 200)
	return d
}

func mustHostname(t *testing.T) string {
	t.Helper()
	hostname, err := os.Hostname()
	require.NoError(t, err)
	return hostname
}
