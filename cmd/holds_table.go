package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/inbox"
)

// holdsTable prints holds as an aligned table; with a public URL (the
// engine's SVC_PUBLIC_URL) a last column gives each hold's web page.
func holdsTable(w io.Writer, items []engine.Hold, now time.Time, public string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "ID\tSTATUS\tRULE\tAGENT\tABILITY\tENVIRONMENT\tCOUNT\tEXPIRES IN"
	if public != "" {
		header += "\tPAGE"
	}
	fmt.Fprintln(tw, header)
	for _, h := range items {
		agent, ability, environment, count := "-", "-", "-", int64(0)
		if e := h.Envelope; e != nil {
			agent, ability, environment, count = e.Agent.ID, e.Action.Ability, e.Target.Environment, e.Magnitude.Count
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s", h.ID, h.Status, h.Rule, agent, ability,
			environment, count, expiresIn(h, now))
		if public != "" {
			fmt.Fprintf(tw, "\t%s", inbox.HoldURL(public, h.ID))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, "(no holds)")
		return err
	}
	return nil
}

// paramsText renders an envelope's params as compact JSON, keys sorted, so
// that an approver sees what the action would do (a delete's where clause):
// < and > as they are, control characters escaped.
func paramsText(params map[string]any) string {
	if len(params) == 0 {
		return "{}"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(params); err != nil {
		return fmt.Sprintf("(unprintable: %v)", err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// expiresIn renders the time left on a live hold, "-" on a settled one.
func expiresIn(h engine.Hold, now time.Time) string {
	if h.Status != engine.HoldPending && h.Status != engine.HoldApproved {
		return "-"
	}
	left := h.ExpiresTS.Sub(now).Round(time.Second)
	if left <= 0 {
		return "now"
	}
	return left.String()
}

// printHold prints one hold as JSON or as a two-column detail table, with
// its web page when public (SVC_PUBLIC_URL) is set.
func printHold(w io.Writer, format string, h engine.Hold, public string) error {
	if format == "json" {
		return writeIndented(w, h)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", h.ID)
	if public != "" {
		row("page", inbox.HoldURL(public, h.ID))
	}
	row("status", h.Status)
	row("rule", h.Rule)
	row("reason", h.Reason)
	if e := h.Envelope; e != nil {
		row("agent", e.Agent.ID)
		row("on behalf of", e.Agent.OnBehalfOf)
		row("session", e.Agent.SessionID)
		row("ability", e.Action.Ability)
		row("verb", e.Action.Verb)
		row("target", e.Target.Kind+" "+e.Target.Ref)
		row("environment", e.Target.Environment)
		row("count", fmt.Sprint(e.Magnitude.Count))
		row("axes", fmt.Sprintf("reversibility=%s blast_radius=%s externality=%s",
			e.Axes.Reversibility, e.Axes.BlastRadius, e.Axes.Externality))
		row("params", paramsText(e.Params))
	}
	row("envelope hash", h.EnvelopeHash)
	row("created", engine.FormatTime(h.CreatedTS))
	row("expires", engine.FormatTime(h.ExpiresTS)+" (in "+expiresIn(h, time.Now())+")")
	if h.DecidedBy != nil {
		verified := h.DecidedByVerified != nil && *h.DecidedByVerified
		row("decided by", fmt.Sprintf("%s (verified: %t)", h.DecidedBy, verified))
	}
	if h.DecidedTS != nil {
		row("decided", engine.FormatTime(*h.DecidedTS))
	}
	if h.ResolutionReason != "" {
		row("resolution reason", h.ResolutionReason)
	}
	if h.ConsumedTS != nil {
		row("consumed", engine.FormatTime(*h.ConsumedTS))
	}
	row("decision id", h.DecisionID)
	return tw.Flush()
}
