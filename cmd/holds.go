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
	}
	c.AddCommand(newHoldsListCommand(), newHoldsShowCommand(),
		newHoldsResolveCommand("approve", "approve"), newHoldsResolveCommand("reject", "reject"),
		newHoldsResolveCommand("resolve", ""))
	return c
}

// clientCall wraps a client command: one clear line and exit 1 on error.
func clientCall(run func(ctx context.Context, cl *client, w io.Writer) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, _ []string) error {
		cl, err := newClient()
		if err == nil {
			err = run(c.Context(), cl, c.OutOrStdout())
		}
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		return nil
	}
}

func newHoldsListCommand() *cobra.Command {
	var out outputFlag
	var status string
	var limit int
	var allPages bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List holds (oldest first)",
		Args:  cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return out.validate()
		},
	}
	c.RunE = clientCall(func(ctx context.Context, cl *client, w io.Writer) error {
		items, err := listHolds(ctx, cl, status, limit, allPages)
		if err != nil {
			return err
		}
		if out.format == "json" {
			return writeIndented(w, items)
		}
		return holdsTable(w, items, time.Now())
	})
	out.register(c)
	c.Flags().StringVar(&status, "status", "all", "pending, approved, rejected, expired, consumed or all")
	c.Flags().IntVar(&limit, "limit", engine.DefaultHoldLimit, "page size (1-1000)")
	c.Flags().BoolVar(&allPages, "all-pages", false, "follow next_cursor until the last page")
	return c
}

func listHolds(ctx context.Context, cl *client, status string, limit int, allPages bool) ([]engine.Hold, error) {
	items := []engine.Hold{}
	cursor := ""
	for {
		q := url.Values{"status": {status}, "limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page engine.HoldPage
		if _, err := cl.do(ctx, "GET", "/v1/holds?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
		if !allPages || page.NextCursor == nil {
			return items, nil
		}
		cursor = *page.NextCursor
	}
}

func newHoldsShowCommand() *cobra.Command {
	var out outputFlag
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one hold in full",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return out.validate() },
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		return clientCall(func(ctx context.Context, cl *client, w io.Writer) error {
			var h engine.Hold
			if _, err := cl.do(ctx, "GET", "/v1/holds/"+url.PathEscape(args[0]), nil, &h); err != nil {
				return err
			}
			return printHold(w, out.format, h)
		})(c, args)
	}
	out.register(c)
	return c
}

// newHoldsResolveCommand builds approve, reject (fixed decision) and
// resolve (decision from --decision).
func newHoldsResolveCommand(use, fixed string) *cobra.Command {
	var out outputFlag
	var reason, decision string
	c := &cobra.Command{
		Use:   use + " ID",
		Short: strings.ToUpper(use[:1]) + use[1:] + " a pending hold (as the principal of SVC_CORE_TOKEN)",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if fixed == "" && decision != "approve" && decision != "reject" {
				return fmt.Errorf("--decision must be approve or reject, got %q", decision)
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
			body, err := json.Marshal(map[string]string{"decision": d, "reason": reason})
			if err != nil {
				return err
			}
			var h engine.Hold
			if _, err := cl.do(ctx, "POST", "/v1/holds/"+url.PathEscape(args[0])+"/resolve", body, &h); err != nil {
				return err
			}
			return printHold(w, out.format, h)
		})(c, args)
	}
	out.register(c)
	c.Flags().StringVar(&reason, "reason", "", "why (recorded with the resolution)")
	if fixed == "" {
		c.Flags().StringVar(&decision, "decision", "", "approve or reject")
	}
	return c
}

func writeIndented(w io.Writer, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(raw))
	return err
}
