package engine

import (
	"bytes"
	"encoding/json"

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
	log     zerolog.Logger
	tail    int
	last    []byte // the latest tail bytes
	partial []byte // an unterminated line
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

// line logs one line at the level recordLevel gives it.
func (o *opaServerOutput) line(b []byte) {
	s := opaSnippet(b)
	if s == "" {
		return
	}
	o.log.WithLevel(recordLevel(b)).Str("opa", s).Msg("opa server output")
}

// opaRecordMembers are the members of opa's JSON log records svc reads.
var opaRecordMembers = [...]string{"level", "err"}

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
