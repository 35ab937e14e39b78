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
	"os"
	"slices"

	"github.com/spf13/cobra"
)

// Version is the svc version, set at build time with
// -ldflags "-X github.com/svc-dev/svc/cmd.Version=..."; a build of a tagged
// module release (go install ...@vX.Y.Z) reports that tag instead of the
// default (version.go).
var Version = "0.3.0"

// Exit codes shared by every command (README, "Exit codes"); svc decide
// adds its verdict codes (decide.go). exitUsage is used by no verdict and no
// other failure, so that a hook never reads a typo as a decision.
const (
	exitFailure = 1  // the command could not do its work: engine refused or unreachable, serve failed
	exitConfig  = 2  // svc serve: an invalid setting (variable, config file or flag)
	exitUsage   = 64 // unknown command or flag, missing or extra argument, bad flag value (EX_USAGE, sysexits.h)
)

// exitCodesHelp is the exit-code paragraph of the help of the client
// commands (holds, freeze).
const exitCodesHelp = "Exit code: 0 success, 1 the engine refused the request or could not be reached, 64 usage error."

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
	c, err := root.ExecuteC()
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
	// Every error a command's work returns is an *exitError; any other is
	// cobra's or a PreRunE's: the command line itself is wrong.
	fmt.Fprintf(stderr, "svc: %v\nRun '%s --help' for usage.\n", err, c.CommandPath())
	return exitUsage
}

// failure wraps the error of a command's work, if any, with exit code 1.
func failure(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitFailure, err: err}
}

// argsOf returns an argument check that accepts n arguments, each one of
// valid if valid is not empty, and otherwise says what the command wants.
func argsOf(n int, want string, valid ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) > n:
			return fmt.Errorf("%s takes %s, got %q", c.CommandPath(), want, args[n])
		case len(args) < n:
			return fmt.Errorf("%s takes %s", c.CommandPath(), want)
		}
		for _, a := range args {
			if len(valid) > 0 && !slices.Contains(valid, a) {
				return fmt.Errorf("%s takes %s, got %q", c.CommandPath(), want, a)
			}
		}
		return nil
	}
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "svc",
		Short:         "svc is an agent action firewall: policy decisions, human holds and audit for AI agent actions",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(c *cobra.Command, _ []string) {
			if c.Name() == "serve" || c.Name() == "connector" {
				return // they log them, with their other start-up notes
			}
			for _, w := range unknownVariables(os.Environ()) {
				fmt.Fprintln(c.ErrOrStderr(), "svc: warning:", w)
			}
		},
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
		newHealthcheckCommand(),
		newConfigCommand(),
		newMigrateCommand(),
		newBackupCommand(),
	)
	return root
}
