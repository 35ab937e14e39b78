package opa

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine/envelope"
)

// opaOutputTail is how much of a supervised server's latest output is kept
// to explain its exit: why opa stopped is at the end of what it printed.
const opaOutputTail = opaMaxSnippet

// opaServerOutput receives what a supervised opa prints: each line goes to
// the svc log (a policy reload that fails under --watch is only reported
// there), and the latest bytes are kept for the error that reports its exit.
// exec.Cmd calls Write from one goroutine at a time and Wait returns after
// the last Write, so it needs no lock.
type opaServerOutput struct {
	log zerolog.Logger
	// reloaded, when set, is called with each outcome of a reload of the
	// policy pack under --watch: "" when the pack loaded, else opa's error.
	reloaded func(loadErr string)
	tail     int
	last     []byte // the latest tail bytes
	partial  []byte // an unterminated line
}

// Write implements io.Writer; it never fails, so opa is never blocked.
func (o *opaServerOutput) Write(p []byte) (int, error) {
	n := len(p)
	o.last = append(o.last, p...)
	if over := len(o.last) - o.tail; over > 0 {
		o.last = append(o.last[:0], o.last[over:]...)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			o.partial = append(o.partial, p...)
			if len(o.partial) >= opaMaxSnippet {
				o.line(o.partial)
				o.partial = o.partial[:0]
			}
			break
		}
		o.line(append(o.partial, p[:i]...))
		o.partial = o.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// line logs one line at the level recordLevel gives it: one of opa's JSON
// records as a nested object (its fields stay fields for a log pipeline),
// any other line as a string; and it reports the outcome of a reload of
// the pack.
func (o *opaServerOutput) line(b []byte) {
	s := opaSnippet(b)
	if s == "" {
		return
	}
	if loadErr, ok := reloadOutcome(b); ok && o.reloaded != nil {
		o.reloaded(loadErr)
	}
	ev := o.log.WithLevel(recordLevel(b))
	if rec := bytes.TrimSpace(b); len(rec) <= opaMaxSnippet && rec[0] == '{' && utf8.Valid(rec) && json.Valid(rec) {
		ev.RawJSON("opa", rec).Msg("opa server output")
		return
	}
	ev.Str("opa", s).Msg("opa server output")
}

// opaRecordMembers are the members of opa's JSON log records svc reads.
var opaRecordMembers = [...]string{"level", "err", "msg"}

// opaReloadMessage is the message of the record opa logs after reloading
// the files it watches (--watch), with the error of the load in "err".
const opaReloadMessage = "Processed file watch event."

// reloadOutcome reads a record of opa's output: whether it reports a
// reload of the pack, and the load's error, "" when the pack loaded.
func reloadOutcome(b []byte) (string, bool) {
	var members [len(opaRecordMembers)]json.RawMessage
	var msg string
	if envelope.ExactMembers(b, opaRecordMembers[:], members[:]) != nil || members[2] == nil ||
		json.Unmarshal(members[2], &msg) != nil || msg != opaReloadMessage {
		return "", false
	}
	if members[1] == nil || string(members[1]) == "null" {
		return "", true
	}
	var loadErr string
	if json.Unmarshal(members[1], &loadErr) != nil {
		loadErr = opaSnippet(members[1])
	}
	return loadErr, true
}

// recordLevel is the level opa gave a line of its output, and at least warn
// when it reports an error (a failed reload is an info record carrying
// "err"), or is not one of opa's JSON records (whose member names are
// matched exactly, see ExactMembers).
func recordLevel(b []byte) zerolog.Level {
	var members [len(opaRecordMembers)]json.RawMessage
	var level string
	if envelope.ExactMembers(b, opaRecordMembers[:], members[:]) != nil ||
		members[0] != nil && json.Unmarshal(members[0], &level) != nil {
		return zerolog.WarnLevel
	}
	switch {
	case level == "error":
		return zerolog.ErrorLevel
	case level != "warning" && (members[1] == nil || string(members[1]) == "null"):
		return zerolog.InfoLevel
	}
	return zerolog.WarnLevel
}

// snippet renders the latest output on one line, cut to opaMaxSnippet.
func (o *opaServerOutput) snippet() string {
	if s := opaSnippet(o.last); s != "" {
		return s
	}
	return "no output"
}
