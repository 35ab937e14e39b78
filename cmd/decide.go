package cmd

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
)

// Exit codes of `svc decide`, for shell hooks.
const (
	exitAllow       = 0
	exitDeny        = 1
	exitApproval    = 2
	exitUnreachable = 3
)

func newDecideCommand() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "decide [-f envelope.json|-]",
		Short: "Ask the engine at SVC_CORE_URL for a decision on an envelope and print it",
		Long: "Posts an Action Envelope to SVC_CORE_URL/v1/decide with SVC_CORE_TOKEN and prints the decision.\n" +
			"Exit code: 0 allow, 1 deny, 2 require_approval, 3 engine unreachable or error (treat as deny).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runDecide(c, file)
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "-", "envelope file, - for standard input")
	return c
}

func runDecide(c *cobra.Command, file string) error {
	body, err := readInput(c.InOrStdin(), file)
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	cl, err := newClient()
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	var d engine.Decision
	status, err := cl.do(c.Context(), "POST", "/v1/decide", body, &d)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && len(ae.body) > 0:
		_ = writeIndented(c.OutOrStdout(), ae.body) // the engine's own words: error, field, reason
	case d.Decision != "":
		_ = writeIndented(c.OutOrStdout(), d)
	}
	refused := status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge
	if err != nil && !(refused && d.Decision == engine.Deny) {
		return &exitError{code: exitUnreachable, err: err}
	}
	switch d.Decision {
	case engine.Allow:
		return nil
	case engine.RequireApproval:
		return &exitError{code: exitApproval, err: fmt.Errorf("")}
	case engine.Deny:
		if err == nil {
			err = fmt.Errorf("") // the printed decision says it all
		}
		return &exitError{code: exitDeny, err: err}
	}
	return &exitError{code: exitUnreachable, err: fmt.Errorf("engine answered an unknown decision %q", d.Decision)}
}

func readInput(stdin io.Reader, file string) ([]byte, error) {
	if file == "-" || file == "" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read envelope from standard input: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read envelope %s: %w", file, err)
	}
	return b, nil
}
