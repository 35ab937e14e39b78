package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/rego"
	"github.com/svc-dev/svc/replay"
)

// Exit codes of `svc replay`, for CI.
const (
	exitReplayChanged = 1 // 0: nothing changes
	exitReplayError   = 2
)

func newReplayCommand() *cobra.Command {
	var audit, policyDir, opaBin, output string
	c := &cobra.Command{
		Use:   "replay --audit FILE [--policy-dir DIR] [-o table|json]",
		Short: "Re-evaluate audited decisions against a candidate policy pack and print what would change",
		Long: "Reads the decisions of an svc audit log (JSONL), asks the candidate pack (--policy-dir, default the\n" +
			"bundled one) the same question each was asked, with the budgets it saw, and prints the counts per\n" +
			"old → new verdict and rule, then the changed decisions.\n" +
			"Exit code: 0 nothing changes, 1 something changes, 2 the replay could not run, 64 usage error.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if audit == "" {
				return errors.New("--audit is required")
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o must be table or json, got %q", output)
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if err := runReplay(c, audit, policyDir, opaBin, output); err != nil {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitReplayError, err: err}
			}
			return nil
		},
	}
	c.Flags().StringVar(&audit, "audit", "", "`path` of the audit log (SVC_AUDIT_LOG of the engine)")
	c.Flags().StringVar(&policyDir, "policy-dir", "", "candidate policy pack `dir`; empty: the bundled pack")
	c.Flags().StringVar(&opaBin, "opa-bin", "", "opa `binary`; empty: $SVC_OPA_BIN, else opa")
	c.Flags().StringVarP(&output, "output", "o", "table", "output `format`: table or json")
	return c
}

func runReplay(c *cobra.Command, audit, policyDir, opaBin, output string) error {
	f, err := os.Open(audit)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	records, skipped, err := replay.Read(f)
	if err != nil {
		return fmt.Errorf("%s: %w", audit, err)
	}
	dir, cleanup, err := packDir(policyDir)
	if err != nil {
		return err
	}
	defer func() { _ = cleanup() }()
	srv, err := opa.StartOPAServer(opa.OPAServerConfig{Bin: opaBinary(opaBin), PolicyDir: dir,
		Timeout: time.Minute, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()
	if err := srv.Check(c.Context()); err != nil {
		return fmt.Errorf("candidate pack %s: %w", dir, err)
	}
	rep, err := replay.Run(c.Context(), srv, records, 4)
	if err != nil {
		return err
	}
	rep.Skipped = skipped
	if err := writeReport(c, rep, output); err != nil {
		return err
	}
	if rep.Changed > 0 {
		return &exitError{code: exitReplayChanged, err: fmt.Errorf("")}
	}
	return nil
}

func writeReport(c *cobra.Command, rep replay.Report, output string) error {
	if output == "json" {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteTable(c.OutOrStdout())
}

// packDir is the candidate pack's directory: dir, or the bundled pack
// written to a private directory that cleanup removes.
func packDir(dir string) (string, func() error, error) {
	if dir != "" {
		return dir, func() error { return nil }, nil
	}
	return rego.Materialize()
}

// opaBinary is the opa binary a policy command runs: bin, else
// $SVC_OPA_BIN, else opa on PATH.
func opaBinary(bin string) string {
	if bin != "" {
		return bin
	}
	if env := os.Getenv("SVC_OPA_BIN"); env != "" {
		return env
	}
	return "opa"
}
