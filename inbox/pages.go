package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/api"
	"github.com/svc-dev/svc/engine/envelope"
)

// listKind is one of the two lists: the inbox (pending holds) and the
// history (holds no longer pending). Both take the query parameters of
// GET /v1/holds (status, limit, order, cursor), with their own defaults.
type listKind struct {
	Page     string // template and nav name
	Title    string
	Path     string
	Status   string   // default status filter
	Statuses []string // filters offered
}

var (
	pendingList = listKind{Page: "inbox", Title: "Pending holds", Path: "/ui/inbox", Status: engine.HoldPending,
		Statuses: []string{engine.HoldPending, engine.HoldApproved, "all"}}
	historyList = listKind{Page: "history", Title: "History", Path: "/ui/history", Status: "settled",
		Statuses: []string{"settled", engine.HoldApproved, engine.HoldRejected, engine.HoldExpired, engine.HoldConsumed}}
)

// link is a labelled URL, marked when it is the page shown.
type link struct {
	Label   string
	URL     string
	Current bool
}

// listView is the data of a list page.
type listView struct {
	Viewer  *viewer
	Kind    listKind
	Filters []link
	Orders  []link
	Rows    []holdRow
	Next    string // URL of the next page, "" at the end
	Live    bool   // reload when a hold arrives or leaves pending
}

// holdRow is one hold as the lists show it.
type holdRow struct {
	ID, Link, Status, Rule, Agent, OnBehalfOf, Target, Environment, Action string
	Created, TimeLeft, DecidedBy, Decided, Note                            string
}

// listPage serves a list of kind.
func (a *App) listPage(kind listKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := viewerOf(r)
		vals, err := engine.StrictQuery(r, "status", "limit", "order", "cursor")
		if err != nil {
			a.failErr(w, r, v, err)
			return
		}
		setDefault(vals, "status", kind.Status)
		setDefault(vals, "order", engine.OrderNewest)
		setDefault(vals, "limit", fmt.Sprint(pageSize))
		q, err := engine.ParseHoldQuery(vals)
		if err != nil {
			a.failErr(w, r, v, err)
			return
		}
		now := a.deps.Now()
		q.Now = now
		page, err := a.deps.Holds.List(r.Context(), q)
		if err != nil {
			a.failErr(w, r, v, err)
			return
		}
		view := listView{Viewer: v, Kind: kind, Live: true}
		for _, h := range page.Items {
			view.Rows = append(view.Rows, rowOf(h, now))
		}
		if page.NextCursor != nil {
			view.Next = withParam(kind.Path, vals, "cursor", *page.NextCursor)
		}
		base := url.Values{"order": {vals.Get("order")}, "limit": {vals.Get("limit")}}
		for _, s := range kind.Statuses {
			view.Filters = append(view.Filters, link{Label: s, URL: withParam(kind.Path, base, "status", s),
				Current: s == q.Status})
		}
		base = url.Values{"status": {q.Status}, "limit": {vals.Get("limit")}}
		for _, o := range []string{engine.OrderNewest, engine.OrderOldest} {
			view.Orders = append(view.Orders, link{Label: o + " first", URL: withParam(kind.Path, base, "order", o),
				Current: o == vals.Get("order")})
		}
		a.render(w, http.StatusOK, kind.Page, view)
	}
}

// setDefault sets key to def when the query does not give it.
func setDefault(vals url.Values, key, def string) {
	if _, ok := vals[key]; !ok {
		vals.Set(key, def)
	}
}

// withParam is path?vals with key set to value (vals is not changed).
func withParam(path string, vals url.Values, key, value string) string {
	out := url.Values{}
	for k, v := range vals {
		if k != "cursor" {
			out[k] = v
		}
	}
	out.Set(key, value)
	return path + "?" + out.Encode()
}

// rowOf is hold h as a list row, as of now.
func rowOf(h engine.Hold, now time.Time) holdRow {
	row := holdRow{ID: h.ID, Link: holdPath(h.ID), Status: h.Status, Rule: h.Rule,
		Created: engine.FormatTime(h.CreatedTS), TimeLeft: timeLeft(h, now), Note: h.ResolutionReason}
	if e := h.Envelope; e != nil {
		row.Agent, row.OnBehalfOf, row.Environment = e.Agent.ID, e.Agent.OnBehalfOf, e.Target.Environment
		row.Target = strings.TrimSpace(e.Target.Kind + " " + e.Target.Ref)
		row.Action = e.Action.Verb + " · " + e.Action.Ability
	}
	if h.DecidedBy != nil {
		row.DecidedBy = h.DecidedBy.String()
	}
	if h.DecidedTS != nil {
		row.Decided = engine.FormatTime(*h.DecidedTS)
	}
	return row
}

// holdPath is the app's page of hold id.
func holdPath(id string) string { return api.UIPrefix + "holds/" + url.PathEscape(id) }

// timeLeft is the time left on a live hold, "–" on a settled one.
func timeLeft(h engine.Hold, now time.Time) string {
	if h.Status != engine.HoldPending && h.Status != engine.HoldApproved {
		return "–"
	}
	left := h.ExpiresTS.Sub(now).Round(time.Second)
	if left <= 0 {
		return "expired"
	}
	return left.String()
}

// holdView is the data of a hold's page.
type holdView struct {
	Viewer   *viewer
	Row      holdRow
	Hold     engine.Hold
	Env      *envelope.Envelope
	Params   string // pretty-printed JSON
	Context  string // pretty-printed JSON, "" when none
	Budget   *engine.Usage
	Money    string // the session's money use in words, "" when none
	Window   string
	Problem  string // why the last decision was refused
	Why      string // why this person may not decide this hold
	Decide   bool   // the person may decide it: show the buttons
	MaxNote  int
	Verified bool
}

// handleHold shows a hold and, if the signed-in person may decide it, the
// Approve and Reject buttons; if not, why.
func (a *App) handleHold(w http.ResponseWriter, r *http.Request) {
	a.showHold(w, r, http.StatusOK, "")
}

// showHold renders the hold of r's path with status, and problem, the
// refusal of a decision just tried, if any.
func (a *App) showHold(w http.ResponseWriter, r *http.Request, status int, problem string) {
	v := viewerOf(r)
	now := a.deps.Now()
	h, vetErr := a.deps.Resolver.Vet(r.Context(), engine.ResolveRequest{HoldID: r.PathValue("id"),
		Credential: v.session.token, Now: now})
	if h.ID == "" {
		a.failErr(w, r, v, vetErr)
		return
	}
	view := holdView{Viewer: v, Row: rowOf(h, now), Hold: h, Env: h.Envelope, Problem: problem,
		Decide: vetErr == nil, MaxNote: noteMax, Window: a.cfg.Window.String()}
	if vetErr != nil {
		view.Why = whyNot(vetErr)
	}
	if h.DecidedByVerified != nil {
		view.Verified = *h.DecidedByVerified
	}
	if e := h.Envelope; e != nil {
		view.Params = pretty(e.Params)
		if len(e.Context) > 0 {
			view.Context = pretty(e.Context)
		}
		if t, err := a.deps.Budgets.Usage(r.Context(), engine.ScopeSession, e.Agent.SessionID, now.Add(-a.cfg.Window)); err != nil {
			a.deps.Logger.Warn().Err(err).Str("hold_id", h.ID).Msg("web app: read session budget use")
		} else {
			view.Budget = &t
			view.Money = moneyWords(t.Money)
		}
	}
	a.render(w, status, "hold", view)
}

// moneyWords writes sums of money per currency, such as "4000.5 EUR, 12
// USD", currencies in name order; "" when none was spent.
func moneyWords(a engine.Amounts) string {
	parts := make([]string, 0, len(a))
	for _, cur := range slices.Sorted(maps.Keys(a)) {
		v := a[cur]
		sign := ""
		if v < 0 {
			sign, v = "-", -v
		}
		frac := strings.TrimRight(fmt.Sprintf("%04d", v%10000), "0")
		n := sign + strconv.FormatInt(v/10000, 10)
		if frac != "" {
			n += "." + frac
		}
		parts = append(parts, n+" "+cur)
	}
	return strings.Join(parts, ", ")
}

// noteMax is the longest note, in bytes (holds.MaxReasonBytes).
const noteMax = 1024

// whyNot says in words why the resolver would refuse the person.
func whyNot(err error) string {
	_, reason := explain(err)
	var e *engine.Error
	if errors.As(err, &e) && e.Name == "actor_is_approver" {
		return "You cannot decide this hold: " + reason + " (four eyes: " + fmt.Sprint(e.Fields["principal"]) +
			" is the requesting agent or the principal it acts for)."
	}
	return "You cannot decide this hold: " + reason + "."
}

// pretty renders v as indented JSON, keys sorted, numbers as the agent
// sent them; the template escapes it.
func pretty(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("(cannot be shown: %v)", err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// handleResolve approves or rejects a hold with the person's token, as
// POST /v1/holds/{id}/resolve does; the note is the resolution's reason.
func (a *App) handleResolve(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	if !a.postedForm(w, r, v) {
		return
	}
	id := r.PathValue("id")
	h, err := a.deps.Resolver.Resolve(r.Context(), engine.ResolveRequest{HoldID: id, Credential: v.session.token,
		Decision: r.PostFormValue("decision"), Reason: envelope.Clean(r.PostFormValue("note")), Now: a.deps.Now()})
	if err != nil {
		status, reason := explain(err)
		if status == http.StatusNotFound || status >= http.StatusInternalServerError {
			a.failErr(w, r, v, err)
			return
		}
		a.showHold(w, r, status, "Not done: "+reason+".")
		return
	}
	a.deps.Logger.Info().Str("hold_id", h.ID).Str("status", h.Status).Str("principal", v.Principal.String()).
		Msg("web app: hold resolved")
	if a.deps.Resolved != nil {
		a.deps.Resolved(h.ID)
	}
	http.Redirect(w, r, holdPath(h.ID), http.StatusSeeOther)
}
