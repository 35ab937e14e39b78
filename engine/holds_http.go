package engine

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine/envelope"
)

// Hold listing bounds (spec §4.2).
const (
	DefaultHoldLimit = 100
	MaxHoldLimit     = 1000
)

var holdStatuses = map[string]bool{HoldPending: true, HoldApproved: true, HoldRejected: true,
	HoldExpired: true, HoldConsumed: true, "settled": true, "all": true}

// HoldStatusReason is the reason of a status filter that is none of the
// statuses, settled (every hold no longer pending) or all.
const HoldStatusReason = "must be one of pending, approved, rejected, expired, consumed, settled, all"

// Orders of a hold listing (the order parameter of GET /v1/holds).
const (
	OrderOldest = "oldest"
	OrderNewest = "newest"
)

// digits is a whole number as written in a query: decimal digits only, any
// number of them (strconv.Atoi then refuses one too large).
var digits = regexp.MustCompile(`^[0-9]+$`)

// StrictQuery reads r's query string strictly: one that does not parse
// (a ";" separator, a bad %-escape) or names a parameter other than names
// is refused naming it, never read as the defaults. The web app reads its
// lists with it too.
func StrictQuery(r *http.Request, names ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, InvalidField("query", "must be name=value pairs joined by & ("+err.Error()+")")
	}
	for name := range q {
		if !slices.Contains(names, name) {
			return nil, InvalidField(name, "is not a parameter of this route (accepted: "+strings.Join(names, ", ")+")")
		}
	}
	return q, nil
}

// InvalidField is the 400 of a request value at fault:
// {error: invalid_request, field, reason}.
func InvalidField(field, reason string) *Error {
	return &Error{Code: EINVALID, Message: field + ": " + reason,
		Fields: map[string]any{"field": field, "reason": reason}}
}

// ParseHoldQuery parses status, limit, order and cursor strictly: a
// parameter given twice, empty or out of range is refused, never read as a
// default. The web app (package inbox) reads its listings with it too.
func ParseHoldQuery(q url.Values) (HoldQuery, error) {
	out := HoldQuery{Status: "all", Limit: DefaultHoldLimit}
	for _, name := range []string{"status", "limit", "order", "cursor"} {
		vals, ok := q[name]
		if !ok {
			continue
		}
		if len(vals) != 1 || vals[0] == "" {
			return out, InvalidField(name, "must be given once, with a value")
		}
		v := vals[0]
		switch name {
		case "status":
			if !holdStatuses[v] {
				return out, InvalidField(name, HoldStatusReason)
			}
			out.Status = v
		case "limit":
			n, err := strconv.Atoi(v)
			if !digits.MatchString(v) || err != nil || n < 1 || n > MaxHoldLimit {
				return out, InvalidField(name, "must be an integer from 1 to 1000")
			}
			out.Limit = n
		case "order":
			if v != OrderOldest && v != OrderNewest {
				return out, InvalidField(name, "must be oldest or newest")
			}
			out.Newest = v == OrderNewest
		case "cursor":
			out.Cursor = v
		}
	}
	return out, nil
}

func (s *Server) handleListHolds(w http.ResponseWriter, r *http.Request) {
	raw, err := StrictQuery(r, "status", "limit", "order", "cursor")
	if err != nil {
		s.writeError(w, err)
		return
	}
	q, err := ParseHoldQuery(raw)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q.Now = s.engine.deps.Now()
	page, err := s.holds.ListJSON(r.Context(), q)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(page) // the client may be gone; nothing to do
}

// handleGetHold answers a hold; with ?wait=<seconds> it first waits, up to
// MaxHoldWait, until the hold leaves pending (awaitHold). A client that
// leaves during the wait gets nothing more.
func (s *Server) handleGetHold(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	raw, err := StrictQuery(r, "wait")
	if err == nil {
		wait, err = holdWaitQuery(raw)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	if wait > 0 {
		release, ok := s.waitSlot()
		if !ok {
			// Every slot waits: answered at once, the connection freed.
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			wait = 0
		}
		defer release()
	}
	h, err := s.awaitHold(r.Context(), r.PathValue("id"), wait)
	if r.Context().Err() != nil {
		return
	}
	if err != nil {
		s.writeError(w, notFoundHold(err, r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// notFoundHold gives a not-found error the body of spec §4.3.
func notFoundHold(err error, id string) error {
	if ErrorCode(err) == ENOTFOUND {
		return &Error{Code: ENOTFOUND, Name: "not_found", Message: "no such hold",
			Fields: map[string]any{"hold_id": id}}
	}
	return err
}

// resolveFields are the member names of a resolve body (docs/api.md).
var resolveFields = []string{"decision", "reason", "principal", "principal.type", "principal.id"}

type resolveBody struct {
	Decision  *string    `json:"decision"` // nil and "" are both refused by the resolver
	Reason    *string    `json:"reason"`
	Principal *Principal `json:"principal"`
}

func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request) {
	raw, err := s.readBody(w, r)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	var body resolveBody
	if err := decodeStrict(raw, &body, "body must be a JSON object {decision, reason?}", resolveFields...); err != nil {
		s.writeError(w, err)
		return
	}
	// The resolver validates decision after looking the hold up, so an
	// unknown hold is a 404 whatever the body says.
	req := ResolveRequest{HoldID: r.PathValue("id"), Credential: bearer(r), Asserted: body.Principal,
		Now: s.engine.deps.Now()}
	if body.Decision != nil {
		req.Decision = *body.Decision
	}
	if body.Reason != nil {
		req.Reason = envelope.Clean(*body.Reason)
	}
	h, err := s.resolver.Resolve(r.Context(), req)
	if err != nil {
		s.writeError(w, notFoundHold(err, req.HoldID))
		return
	}
	s.watch.notify(req.HoldID)
	writeJSON(w, http.StatusOK, h)
}
