package connector

import (
	"github.com/svc-dev/svc/engine/envelope"
)

// redactedHeader is the value LiteLLM gives a client header that is not
// listed in the guardrail's extra_headers.
const redactedHeader = "[present]"

// unknownSession is the session of a request that names none: all such
// requests of an org share one budget, the stricter choice.
const unknownSession = "unknown"

// maxSessionBytes bounds a session name kept as sent; a longer one is
// replaced by its digest.
const maxSessionBytes = 200

// Session resolves the session of gateway spec §2.5 — svc_session, the
// x-svc-session header (unless redacted or blank), the end user, the trace
// id, the call id — namespaced gateway:<org>:<session>, so that two orgs
// never share a budget.
func Session(org string, h SessionHints, endUser string) string {
	s := unknownSession
	for _, v := range []string{h.SvcSession, h.Header, endUser, h.TraceID, h.CallID} {
		v = envelope.Clean(v)
		if v != "" && v != redactedHeader {
			s = v
			break
		}
	}
	if len(s) > maxSessionBytes {
		s = "sha256:" + digest(s)
	}
	return "gateway:" + org + ":" + s
}
