package export

import (
	"strconv"
	"time"
)

// Syslog severities (RFC 5424 §6.2.1) used by svc's events (spec §6.1).
const (
	sevCritical = 2
	sevError    = 3
	sevWarning  = 4
	sevNotice   = 5
	sevInfo     = 6
)

// RFC 5424 §6 header field limits.
const (
	maxHostname = 255
	maxAppName  = 48
	maxProcID   = 128
	maxMsgID    = 32
)

// bom marks an MSG as UTF-8 (RFC 5424 §6.4, MSG-UTF8).
const bom = "\xEF\xBB\xBF"

// header is the RFC 5424 HEADER of one message. Field values are sanitised
// when framed: anything outside PRINTUSASCII becomes '_', overlong values
// are cut to the RFC limit, and empty values become the NILVALUE "-".
type header struct {
	facility int
	severity int
	time     time.Time
	hostname string
	appName  string
	procID   string
	msgID    string
}

// appendMessage appends the RFC 5424 SYSLOG-MSG
//
//	<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID - MSG
//
// to b. STRUCTURED-DATA is always the NILVALUE. msg is written as is: the
// caller decides whether it is MSG-UTF8 (starts with the BOM) or MSG-ANY.
func appendMessage(b []byte, h header, msg []byte) []byte {
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(h.facility*8+h.severity), 10)
	b = append(b, ">1 "...)
	b = appendTimestamp(b, h.time)
	b = append(b, ' ')
	b = appendField(b, h.hostname, maxHostname)
	b = append(b, ' ')
	b = appendField(b, h.appName, maxAppName)
	b = append(b, ' ')
	b = appendField(b, h.procID, maxProcID)
	b = append(b, ' ')
	b = appendField(b, h.msgID, maxMsgID)
	b = append(b, " -"...)
	if len(msg) > 0 {
		b = append(b, ' ')
		b = append(b, msg...)
	}
	return b
}

// appendTimestamp writes t as RFC 3339 in UTC with microseconds, the finest
// TIME-SECFRAC RFC 5424 allows; the zero time is the NILVALUE.
func appendTimestamp(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, '-')
	}
	return t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
}

// appendField appends a header field as 1*max PRINTUSASCII, or "-" if empty.
func appendField(b []byte, v string, limit int) []byte {
	if v == "" {
		return append(b, '-')
	}
	if len(v) > limit {
		v = v[:limit]
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 33 || c > 126 {
			c = '_'
		}
		b = append(b, c)
	}
	return b
}

// appendOctetCounted appends msg with the octet-counting framing of RFC 6587
// §3.4.1 and RFC 5425 §4.3: MSG-LEN SP SYSLOG-MSG, MSG-LEN in decimal octets.
func appendOctetCounted(b []byte, msg []byte) []byte {
	b = strconv.AppendInt(b, int64(len(msg)), 10)
	b = append(b, ' ')
	return append(b, msg...)
}

// withBOM returns msg prefixed with the UTF-8 BOM when it holds any
// non-ASCII octet (RFC 5424 §6.4: a UTF-8 MSG must start with the BOM);
// pure ASCII is sent as MSG-ANY, which every collector reads unchanged.
func withBOM(msg []byte) []byte {
	for _, c := range msg {
		if c >= 0x80 {
			return append([]byte(bom), msg...)
		}
	}
	return msg
}
