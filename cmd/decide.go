package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
)

// Exit codes of `svc decide`, for shell hooks; a usage error is exitUsage
// (64), which no verdict uses.
const (
	exitAllow       = 0
	exitDeny        = 1
	exitApproval    = 2
	exitUnreachable = 3
)

// decideHelp is the exit-code paragraph of `svc decide --help`.
var decideHelp = "Exit code: 0 allow, 1 deny (also an allow or require_approval carrying an obligation outside\n" +
	"the documented set: " + strings.Join(engine.KnownObligations, ", ") + "), 2 require_approval, 3 engine unreachable,\n" +
	"error or unusable answer (treat as deny), 64 usage error (unknown flag, an argument without -f: nothing was asked).\n" +
	"The obligations of an allow are printed: the caller honours them."

func newDecideCommand() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "decide [-f envelope.json|-]",
		Short: "Ask the engine at SVC_CORE_URL for a decision on an envelope and print it",
		Long: "Posts an Action Envelope to SVC_CORE_URL/v1/decide with SVC_CORE_TOKEN and prints the decision.\n" +
			decideHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("svc decide takes no argument; to post the envelope in %s, use -f %s", args[0], args[0])
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			return runDecide(c, file)
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "-", "`path` of the envelope file, - for standard input")
	return c
}

func runDecide(c *cobra.Command, file string) error {
	body, err := readInput(c.InOrStdin(), file)
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	cl, err := newClient(c.ErrOrStderr())
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	d, status, err := askEngine(c.Context(), cl, body)
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
	if unknown := engine.UnknownObligations(d.Obligations); len(unknown) > 0 && d.Decision != engine.Deny {
		// An obligation svc decide cannot honour: the action must not run
		// (spec: unknown obligation → fail closed).
		return &exitError{code: exitDeny, err: fmt.Errorf("refused (fail closed): the %s decision carries obligations svc decide does not understand: %s",
			d.Decision, strings.Join(unknown, ", "))}
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

// askEngine posts the envelope and reads the engine's answer. A non-2xx
// answer is an *apiError, whose body is still read as a decision when it is
// one (a refused envelope is a deny). An answer that names its decision
// ambiguously is an error whatever its status, and yields no decision.
func askEngine(ctx context.Context, cl *client, envelope []byte) (engine.Decision, int, error) {
	var raw json.RawMessage
	var d engine.Decision
	status, err := cl.do(ctx, "POST", "/v1/decide", envelope, &raw)
	if len(raw) == 0 { // no answer, or one that is not JSON: err says which
		return d, status, err
	}
	if merr := exactDecisionMember(raw); merr != nil {
		if err != nil { // a non-2xx answer: its status says most; its body, ambiguous, is not printed
			return d, status, fmt.Errorf("%v (answer refused: %w)", err, merr)
		}
		return d, status, fmt.Errorf("engine answer refused (answered %d): %w", status, merr)
	}
	if uerr := json.Unmarshal(raw, &d); uerr != nil && err == nil {
		err = fmt.Errorf("engine answer is not a decision: %w", uerr)
	}
	return d, status, err
}

// exactDecisionMember checks that the answer raw, a JSON value, is an
// object naming its decision member once, spelled exactly "decision".
// encoding/json reads the last of two such members, and takes a case
// variant (Decision, or deciſion with a long s) for the member too, where
// another reader of the same answer may read another verdict. Other
// spellings (a full-width ｄecision) are other members, which encoding/json
// ignores too.
func exactDecisionMember(raw []byte) error {
	names, err := envelope.MemberNames(raw)
	if err != nil {
		return errors.New("it is not a JSON object")
	}
	seen := false
	for _, name := range names {
		switch {
		case !strings.EqualFold(name, "decision"):
		case name != "decision":
			return fmt.Errorf("it has a member %q, which is decision spelled another way", name)
		case seen:
			return errors.New("it names decision twice")
		default:
			seen = true
		}
	}
	return nil
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
