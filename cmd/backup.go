package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/ledger"
)

// backupExitHelp is the exit-code paragraph of `svc backup --help`.
const backupExitHelp = "Exit code: 0 copied, 1 the copy failed (or FILE exists), 2 no database named, 64 usage error."

func newBackupCommand() *cobra.Command {
	var to, from string
	v := newViper(serveDefaults)
	c := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Copy the engine's database (SVC_HOLDS_PATH) consistently while svc serves",
		Long: "Write a consistent copy of the engine's database (SVC_HOLDS_PATH, or --from) to FILE, which must not\n" +
			"exist, while svc serve keeps deciding; restore it as docs/operations.md says.\n" + backupExitHelp,
		Args: argsOf(0, "no argument (the copy is --to FILE)"),
		PreRunE: func(*cobra.Command, []string) error {
			if to == "" {
				return errors.New("--to FILE is required")
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if from == "" {
				from = (&parser{v: v}).str("holds_path")
			}
			if from == "" {
				return &exitError{code: exitConfig, err: errors.New("SVC_HOLDS_PATH: must name the database to copy (or pass --from)")}
			}
			if err := ledger.Backup(c.Context(), from, to); err != nil {
				return failure(err)
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "copied %s to %s\n", from, to)
			return failure(err)
		},
	}
	c.Flags().StringVar(&to, "to", "", "the copy's path; it must not exist")
	c.Flags().StringVar(&from, "from", "", "the database to copy (default SVC_HOLDS_PATH; the connector's SVC_GATEWAY_LEDGER_PATH works too)")
	return c
}
