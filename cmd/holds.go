package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
)

// outputFlag is the -o flag shared by the holds subcommands.
type outputFlag struct{ format string }

func (o *outputFlag) register(c *cobra.Command) {
	c.Flags().StringVarP(&o.format, "output", "o", "table", "output format: table or json")
}

func (o *outputFlag) validate() error {
	if o.format != "table" && o.format != "json" {
		return fmt.Errorf("-o must be table or json, got %q", o.format)
	}
	return nil
}

func newHoldsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "holds",
		Short: "List, inspect and resolve holds on the engine at SVC_CORE_URL",
		Long:  "List, inspect and resolve holds on the engine at SVC_CORE_URL, as the principal of SVC_CORE_TOKEN.\n" + exitCodesHelp,
		Args:  argsOf(0, "a subcommand: list, show, approve, reject or resolve"),
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newHoldsListCommand(), newHoldsShowCommand(),
		newHoldsResolveCommand("approve", "approve"), newHoldsResolveCommand("reject", "reject"),
		newHoldsResolveCommand("resolve", ""))
	return c
}

// clientCall wraps a client command: one clear line and exit 1 on error.
func clientCall(run func(ctx context.Context, cl *client, w io.Writer) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, _ []string) error {
		cl, err := newClient(c.ErrOrStderr())
		if err == nil {
			err = run(c.Context(), cl, c.OutOrStdout())
		}
		return failure(err)
	}
}

func newHoldsListCommand() *cobra.Command {
	var out outputFlag
	var q holdListQuery
	c := &cobra.Command{
		Use:   "list",
		Short: "List holds (oldest first; pending by default)",
		Long: "List holds, oldest first, a page at a time (--limit, then --cursor with the next_cursor printed)\n" +
			"or all of them (--all-pages). -o json prints the page: {items, count, next_cursor}.\n" + exitCodesHelp,
		Args: argsOf(0, "no argument (filter with --status)"),
		PreRunE: func(*cobra.Command, []string) error {
			return out.validate()
		},
	}
	c.RunE = clientCall(func(ctx context.Context, cl *client, w io.Writer) error {
		page, err := listHolds(ctx, cl, q)
		if err != nil {
			return err
		}
		if out.format == "json" {
			return writeIndented(w, page)
		}
		if err := holdsTable(w, page.Items, time.Now(), cl.public); err != nil {
			return err
		}
		return moreHolds(w, page)
	})
	out.register(c)
	c.Flags().StringVar(&q.status, "status", engine.HoldPending, "pending, approved, rejected, expired, consumed, settled (all but pending) or all")
	c.Flags().IntVar(&q.limit, "limit", engine.DefaultHoldLimit, "page size (1-1000)")
	c.Flags().StringVar(&q.cursor, "cursor", "", "`next_cursor` of the previous page, to list the next one")
	c.Flags().BoolVar(&q.allPages, "all-pages", false, "follow next_cursor until the last page")
	return c
}

// holdListQuery is what `svc holds list` asks for.
type holdListQuery struct {
	status, cursor string
	limit          int
	allPages       bool
}

// listHolds fetches one page from q.cursor, or with q.allPages every page
// from there on, returned as one page whose next_cursor is null.
func listHolds(ctx context.Context, cl *client, q holdListQuery) (engine.HoldPage, error) {
	all := engine.HoldPage{Items: []engine.Hold{}}
	cursor := q.cursor
	for {
		v := url.Values{"status": {q.status}, "limit": {strconv.Itoa(q.limit)}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var page engine.HoldPage
		if _, err := cl.do(ctx, "GET", "/v1/holds?"+v.Encode(), nil, &page); err != nil {
			return all, err
		}
		all.Items = append(all.Items, page.Items...)
		all.Count = len(all.Items)
		all.NextCursor = page.NextCursor
		if !q.allPages || page.NextCursor == nil {
			return all, nil
		}
		cursor = *page.NextCursor
	}
}

// moreHolds says, under a table, that the list was cut at --limit and how
// to see the rest.
func moreHolds(w io.Writer, page engine.HoldPage) error {
	if page.NextCursor == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "(more holds exist: the next page is --cursor %s; --all-pages lists every one)\n", *page.NextCursor)
	return err
}

func newHoldsShowCommand() *cobra.Command {
	var out outputFlag
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one hold in full",
		Long:    "Show one hold in full: its envelope's action, target, params and axes, and its resolution.\n" + exitCodesHelp,
		Args:    argsOf(1, "one hold ID (`svc holds list` lists them)"),
		PreRunE: func(*cobra.Command, []string) error { return out.validate() },
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		return clientCall(func(ctx context.Context, cl *client, w io.Writer) error {
			var h engine.Hold
			if _, err := cl.do(ctx, "GET", "/v1/holds/"+url.PathEscape(args[0]), nil, &h); err != nil {
				return err
			}
			return printHold(w, out.format, h, cl.public)
		})(c, args)
	}
	out.register(c)
	return c
}

// newHoldsResolveCommand builds approve, reject (fixed decision) and
// resolve (decision from --decision).
func newHoldsResolveCommand(use, fixed string) *cobra.Command {
	var out outputFlag
	var reason, decision, principal string
	c := &cobra.Command{
		Use:   use + " ID",
		Short: strings.ToUpper(use[:1]) + use[1:] + " a pending hold (as the principal of SVC_CORE_TOKEN)",
		Long:  strings.ToUpper(use[:1]) + use[1:] + " a pending hold (as the principal of SVC_CORE_TOKEN).\n" + exitCodesHelp,
		Args:  argsOf(1, "one hold ID (`svc holds list --status pending` lists them)"),
		PreRunE: func(*cobra.Command, []string) error {
			if fixed == "" && decision != "approve" && decision != "reject" {
				return fmt.Errorf("--decision must be approve or reject, got %q", decision)
			}
			if _, err := assertedPrincipal(principal); err != nil {
				return err
			}
			return out.validate()
		},
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		return clientCall(func(ctx context.Context, cl *client, w io.Writer) error {
			d := fixed
			if d == "" {
				d = decision
			}
			req := map[string]any{"decision": d, "reason": reason}
			if p, _ := assertedPrincipal(principal); p != nil { // PreRunE checked it
				req["principal"] = p
			}
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			var h engine.Hold
			if _, err := cl.do(ctx, "POST", "/v1/holds/"+url.PathEscape(args[0])+"/resolve", body, &h); err != nil {
				return err
			}
			return printHold(w, out.format, h, cl.public)
		})(c, args)
	}
	out.register(c)
	c.Flags().StringVar(&reason, "reason", "", "why (recorded with the resolution)")
	c.Flags().StringVar(&principal, "principal", "", "`type:id` (e.g. human:alice) asserted as the approver, for an engine with\n"+
		"SVC_REQUIRE_VERIFIED_APPROVER=false; recorded as decided_by_verified: false")
	if fixed == "" {
		c.Flags().StringVar(&decision, "decision", "", "approve or reject")
	}
	return c
}

// assertedPrincipal parses --principal type:id; "" is none.
func assertedPrincipal(s string) (*engine.Principal, error) {
	if s == "" {
		return nil, nil
	}
	typ, id, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(typ) == "" || strings.TrimSpace(id) == "" {
		return nil, fmt.Errorf("--principal must be type:id, e.g. human:alice, got %q", s)
	}
	return &engine.Principal{Type: typ, ID: id}, nil
}

func writeIndented(w io.Writer, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(raw))
	return err
}
