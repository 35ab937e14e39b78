package export

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

func TestCEFGolden(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
	}{
		{name: "decision_full", msg: cefDecision(fullDecision(), sevWarning)},
		{name: "decision_minimal", msg: cefDecision(minimalDecision(), sevInfo)},
		{name: "decision_hostile", msg: cefDecision(hostileDecision(), sevError)},
		{name: "lifecycle_start", msg: cefLifecycle(lifecycleStart(), sevNotice)},
		{name: "kill_switch_flipped", msg: cefKillSwitch(killSwitchFlipped(), sevCritical)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, "cef_"+tt.name, tt.msg)
		})
	}
}

// TestCEFNoFieldForgery parses each encoded record with an independent CEF
// reader and checks that every value comes back intact in its own field:
// no value can end a header field, add an extension key or change another.
func TestCEFNoFieldForgery(t *testing.T) {
	for _, d := range []engine.DecisionEvent{fullDecision(), minimalDecision(), hostileDecision()} {
		t.Run(d.DecisionID+"_"+d.Verdict, func(t *testing.T) {
			hdr, ext, err := parseCEF(string(cefDecision(d, verdictSeverity(d.Verdict))))
			require.NoError(t, err)
			assert.Equal(t, []string{"CEF:0", "svc", "svc", headerText(d.SvcVersion), headerText(d.RuleID), headerText(d.Verdict)}, hdr[:6])
			assert.Equal(t, expectedExtensions(d), ext)
		})
	}
}

// A decision whose observed rules would have answered otherwise carries
// their verdict and rule (docs/events.md), in JSON and in CEF.
func TestShadowFieldsExported(t *testing.T) {
	d := minimalDecision()
	d.ShadowVerdict, d.ShadowRule, d.ShadowReason = engine.RequireApproval, "svc.policy/new_rule", "would hold"
	_, ext, err := parseCEF(string(cefDecision(d, verdictSeverity(d.Verdict))))
	require.NoError(t, err)
	assert.Equal(t, expectedExtensions(d), ext)
	assert.Equal(t, "require_approval", ext["shadowVerdict"])
	assert.Equal(t, "svc.policy/new_rule", ext["shadowRule"])
	body, err := marshalASCII(d)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"shadow_verdict":"require_approval","shadow_rule":"svc.policy/new_rule","shadow_reason":"would hold"`)
}

// FuzzCEFValue checks that any string, put in any extension or header
// field, reads back as itself (control characters aside).
func FuzzCEFValue(f *testing.F) {
	for _, s := range []string{"", "a=b", `a\=b`, "x msg=y", "\\", "|", "\n\r", "日本 ✓", "\xff\xfe", "a\\", " lead", "trail "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := minimalDecision()
		d.Reason, d.AgentID, d.RuleID = s, s+"=", s
		hdr, ext, err := parseCEF(string(cefDecision(d, sevInfo)))
		require.NoError(t, err)
		require.Equal(t, headerText(s), hdr[4])
		require.Equal(t, expectedExtensions(d), ext)
	})
}

func TestCEFSeverity(t *testing.T) {
	tests := []struct {
		event  string
		syslog int
		cef    int
	}{
		{"allow", sevInfo, 1}, {"lifecycle", sevNotice, 3}, {"require_approval", sevWarning, 5},
		{"deny", sevError, 7}, {"kill_switch", sevCritical, 9}, {"alert", 1, 10}, {"emergency", 0, 10}, {"debug", 7, 0},
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			require.Equal(t, tt.cef, cefSeverity(tt.syslog))
		})
	}
}

// expectedExtensions is spec §6.5's extension set for d, as a reader should
// decode it: optional and empty fields absent.
func expectedExtensions(d engine.DecisionEvent) map[string]string {
	m := map[string]string{
		"rt": strconv.FormatInt(d.EpochMS, 10), "act": d.Verb, "suser": d.OnBehalfOf,
		"cs1": d.SessionID, "cs1Label": "session_id", "cs2": d.AgentID, "cs2Label": "agent_id",
		"cs3": d.Axes.Reversibility, "cs3Label": "reversibility", "cs4": d.Axes.BlastRadius, "cs4Label": "blast_radius",
		"cs5": d.Axes.Externality, "cs5Label": "externality", "cs6": d.Environment, "cs6Label": "environment",
		"cn1Label": "magnitude_count", "cn2Label": "decision_latency_ms",
		"msg": d.Reason, "flexString1": d.Mode, "flexString1Label": "mode",
		"flexString2": d.Gate, "flexString2Label": "gate",
		"externalId": d.DecisionID, "envelopeHash": d.EnvelopeHash,
		"holdId": d.HoldID, "parentDecisionId": d.ParentDecisionID, "traceparent": d.Traceparent,
		"shadowVerdict": d.ShadowVerdict, "shadowRule": d.ShadowRule,
	}
	m["cn1"] = strconv.FormatInt(d.MagnitudeCount, 10)
	m["cn2"] = strconv.FormatInt(d.DecisionLatencyMS, 10)
	for k, v := range m {
		v = extText(v)
		if v == "" {
			delete(m, k)
			delete(m, k+"Label")
			continue
		}
		m[k] = v
	}
	return m
}

// headerText and extText are what a value reads back as: invalid UTF-8
// becomes U+FFFD, control characters and the Unicode line and paragraph
// separators a space (except CR and LF in extensions, which are escaped and
// restored).
func headerText(s string) string { return sanitize(s, false) }
func extText(s string) string    { return sanitize(s, true) }

func sanitize(s string, keepNewlines bool) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if keepNewlines && (r == '\n' || r == '\r') {
			b.WriteRune(r)
		} else if r < 0x20 || (r >= 0x7F && r < 0xA0) || r == 0x2028 || r == 0x2029 {
			b.WriteByte(' ')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseCEF is a reader written from the CEF specification alone: seven
// '|'-separated header fields where '\' escapes the next character, then
// space-separated key=value extensions where an unescaped '=' ends a key
// (the word before it) and \\, \=, \n, \r are the value escapes.
func parseCEF(s string) ([]string, map[string]string, error) {
	var hdr []string
	var cur strings.Builder
	i := 0
	for ; i < len(s) && len(hdr) < 7; i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return nil, nil, errors.New("dangling escape in header")
			}
			i++
			cur.WriteByte(s[i])
		case '|':
			hdr = append(hdr, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	if len(hdr) != 7 {
		return nil, nil, errors.New("want 7 header fields")
	}
	ext, err := parseExtensions(s[i:])
	return hdr, ext, err
}

func parseExtensions(s string) (map[string]string, error) {
	var eqs []int // offsets of unescaped '='
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == '=' {
			eqs = append(eqs, i)
		}
	}
	ext := map[string]string{}
	for n, eq := range eqs {
		keyStart := strings.LastIndexByte(s[:eq], ' ') + 1
		valEnd := len(s)
		if n+1 < len(eqs) {
			valEnd = strings.LastIndexByte(s[:eqs[n+1]], ' ')
		}
		key := s[keyStart:eq]
		if _, dup := ext[key]; dup || key == "" || valEnd < eq {
			return nil, errors.New("malformed extension near " + key)
		}
		ext[key] = unescapeExt(s[eq+1 : valEnd])
	}
	return ext, nil
}

func unescapeExt(v string) string {
	r := strings.NewReplacer(`\\`, `\`, `\=`, `=`, `\n`, "\n", `\r`, "\r")
	return r.Replace(v)
}
