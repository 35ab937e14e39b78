package engine

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
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

// MaxHoldWait is the longest GET /v1/holds/{id}?wait= waits (docs/api.md):
// well below a gateway's guardrail timeout (LiteLLM's is 600 s) and the
// idle timeouts of common proxies' long-lived requests.
const MaxHoldWait = 300 * time.Second

// ParseHoldWait parses the wait parameter of GET /v1/holds/{id}: absent is
// no wait; else it must be given once, as whole seconds from 0 to
// MaxHoldWait.
func ParseHoldWait(q url.Values) (time.Duration, error) {
	vals, ok := q["wait"]
	if !ok {
		return 0, nil
	}
	maxSeconds := int(MaxHoldWait / time.Second)
	reason := "must be given once, as whole seconds from 0 to " + strconv.Itoa(maxSeconds)
	if len(vals) != 1 || !digits.MatchString(vals[0]) {
		return 0, InvalidField("wait", reason)
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n > maxSeconds {
		return 0, InvalidField("wait", reason)
	}
	return time.Duration(n) * time.Second, nil
}
