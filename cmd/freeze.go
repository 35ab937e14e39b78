package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
)

func newFreezeCommand() *cobra.Command {
	var out outputFlag
	var reason string
	c := &cobra.Command{
		Use:   "freeze on|off|status",
		Short: "Flip, clear or show the kill switch of the engine at SVC_CORE_URL",
		Long: "While frozen, the engine denies every non-read action (svc.policy/frozen).\n`on` and `off` need SVC_CORE_TOKEN to be SVC_AUTH_TOKEN or a human resolver's token.\n" +
			exitCodesHelp,
		Args:      argsOf(1, "one of on, off or status", "on", "off", "status"),
		ValidArgs: []string{"on", "off", "status"},
		PreRunE:   func(*cobra.Command, []string) error { return out.validate() },
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		return clientCall(func(ctx context.Context, cl *client, w io.Writer) error {
			view, err := freeze(ctx, cl, args[0], reason)
			if err != nil {
				return err
			}
			if out.format == "json" {
				return writeIndented(w, view)
			}
			return printFreeze(w, view)
		})(c, args)
	}
	out.register(c)
	c.Flags().StringVar(&reason, "reason", "", "why (recorded with the change)")
	return c
}

func freeze(ctx context.Context, cl *client, action, reason string) (engine.FreezeView, error) {
	var view engine.FreezeView
	if action == "status" {
		_, err := cl.do(ctx, "GET", "/v1/freeze", nil, &view)
		return view, err
	}
	body, err := json.Marshal(map[string]any{"frozen": action == "on", "reason": reason})
	if err != nil {
		return view, err
	}
	_, err = cl.do(ctx, "POST", "/v1/freeze", body, &view)
	return view, err
}

func printFreeze(w io.Writer, v engine.FreezeView) error {
	state := "not frozen"
	if v.Frozen {
		state = "FROZEN: every non-read action is denied"
	}
	if v.Pinned {
		state += " (pinned by SVC_FREEZE)"
	}
	_, err := fmt.Fprintf(w, "%s\nreason: %s\nby: %s\nsince: %s\n", state, v.Reason, v.By, freezeSince(v))
	return err
}

// freezeSince is when the state last changed, "never" if it never has.
func freezeSince(v engine.FreezeView) string {
	if v.UpdatedTS.IsZero() {
		return "never"
	}
	return engine.FormatTime(v.UpdatedTS)
}
