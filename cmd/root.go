// Package cmd is svc's command line: the cobra tree (serve, connector,
// version, decide, holds, freeze, bench), configuration read once through
// viper into typed structs, and the wiring of the engine's and the
// connector's parts. It is the only package that touches
// cobra and viper.
package cmd

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Version is the svc version, set at build time with -ldflags.
var Version = "0.3.0"

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

// Error is the message of the underlying error.
func (e *exitError) Error() string { return e.err.Error() }

// Execute runs the command line and returns the process exit code.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "svc:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "svc:", err)
	return 2
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "svc",
		Short:         "svc is an agent action firewall: policy decisions, human holds and audit for AI agent actions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newServeCommand(),
		newVersionCommand(),
		newDecideCommand(),
		newHoldsCommand(),
		newFreezeCommand(),
		newBenchCommand(),
		newConnectorCommand(),
		newReplayCommand(),
		newPolicyCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the svc version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(c.OutOrStdout(), "svc %s\n", Version)
			return err
		},
	}
}
