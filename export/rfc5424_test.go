package export

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFramerGolden(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	base := header{facility: 16, severity: sevInfo, time: at, hostname: "gw-1.example.com", appName: "svc", procID: "4242", msgID: "decision"}
	tests := []struct {
		name string
		h    func(h header) header
		msg  string
	}{
		{name: "json_local0_info", h: func(h header) header { return h }, msg: `{"event":"decision","verdict":"allow"}`},
		{name: "cef_auth_warning", h: func(h header) header { h.facility, h.severity = 4, sevWarning; return h },
			msg: `CEF:0|svc|svc|0.2.0|svc.policy/x|require_approval|5|rt=1`},
		{name: "kill_switch_local7_critical", h: func(h header) header {
			h.facility, h.severity, h.msgID = 23, sevCritical, "kill_switch"
			return h
		}, msg: `{"event":"kill_switch"}`},
		{name: "nil_values", h: func(header) header { return header{facility: 16, severity: sevNotice} }, msg: ""},
		{name: "unprintable_header_fields", h: func(h header) header {
			h.hostname, h.appName, h.procID, h.msgID = "host name\n", "s v\tc", "1 2", "déc ision"
			return h
		}, msg: "x"},
		{name: "overlong_header_fields", h: func(h header) header {
			h.hostname, h.appName = strings.Repeat("h", 300), strings.Repeat("a", 60)
			h.procID, h.msgID = strings.Repeat("p", 200), strings.Repeat("m", 40)
			return h
		}, msg: "x"},
		{name: "utf8_msg_with_bom", h: func(h header) header { return h }, msg: string(withBOM([]byte("CEF:0|svc|svc|1|r|deny|7|msg=日本語 ✓")))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := appendMessage(nil, tt.h(base), []byte(tt.msg))
			frame := appendOctetCounted(nil, msg)
			golden(t, "rfc5424_"+tt.name, frame)
			assertRFC5424(t, msg)
		})
	}
}

// assertRFC5424 checks the header grammar of RFC 5424 §6 on a framed message
// independently of the golden bytes: PRI range, version 1, and six
// SP-separated header fields of PRINTUSASCII within their length limits.
func assertRFC5424(t *testing.T, msg []byte) {
	t.Helper()
	s := string(msg)
	require.True(t, strings.HasPrefix(s, "<"))
	end := strings.IndexByte(s, '>')
	require.Greater(t, end, 1)
	fields := strings.SplitN(s[end+1:], " ", 8)
	require.GreaterOrEqual(t, len(fields), 7, "header and structured data")
	require.Equal(t, "1", fields[0], "VERSION")
	limits := []int{len("2006-01-02T15:04:05.000000Z"), maxHostname, maxAppName, maxProcID, maxMsgID}
	for i, limit := range limits {
		f := fields[i+1]
		require.NotEmpty(t, f)
		require.LessOrEqual(t, len(f), limit, "field %d", i+1)
		for _, c := range []byte(f) {
			require.True(t, c >= 33 && c <= 126, "field %d has octet %d outside PRINTUSASCII", i+1, c)
		}
	}
	require.Equal(t, "-", fields[6], "STRUCTURED-DATA")
}

func TestOctetCountingCountsBytesNotRunes(t *testing.T) {
	msg := []byte("<134>1 - - - - - - ✓")
	frame := appendOctetCounted([]byte("prefix"), msg)
	require.Equal(t, "prefix22 <134>1 - - - - - - ✓", string(frame))
}

func TestWithBOM(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "ascii stays MSG-ANY", in: `{"a":"b"}`, want: `{"a":"b"}`},
		{name: "utf8 becomes MSG-UTF8", in: "é", want: bom + "é"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, string(withBOM([]byte(tt.in))))
		})
	}
}
