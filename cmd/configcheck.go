package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/connector"
)

// configCheckExitHelp is the exit-code paragraph of `svc config check --help`.
const configCheckExitHelp = "Exit code: 0 every setting and file is valid, 2 at least one is not (each printed), 64 usage error."

// configCommands are the commands whose settings `svc config check` checks.
var configCommands = []string{"serve", "connector"}

func newConfigCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Check svc's configuration without starting it",
		Args:  argsOf(0, "a subcommand: check"),
	}
	c.AddCommand(newConfigCheckCommand())
	return c
}

func newConfigCheckCommand() *cobra.Command {
	var configFile string
	c := &cobra.Command{
		Use:   "check [serve] [connector]",
		Short: "Validate the SVC_* settings and the files they name, printing every problem at once",
		Long: "Validate, without starting anything, the settings of svc serve (default) and/or svc connector exactly as\n" +
			"they would at start-up, and the files they name (policy directory, opa binary, resolver tokens,\n" +
			"CA bundles, the directories of the database and the audit log, tenancy and tool maps). Every problem\n" +
			"is printed, one a line, naming its variable; when there is none, a short summary.\n" + configCheckExitHelp,
		Args: func(c *cobra.Command, args []string) error {
			for _, a := range args {
				if !slices.Contains(configCommands, a) {
					return fmt.Errorf("%s takes serve and/or connector, got %q", c.CommandPath(), a)
				}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"serve"}
			}
			bad := false
			for _, name := range configCommands {
				if !slices.Contains(args, name) {
					continue
				}
				check := checkConnector
				if name == "serve" {
					check = func() configReport { return checkServe(configFile) }
				}
				bad = check().print(c.OutOrStdout(), c.ErrOrStderr(), name) || bad
			}
			if bad {
				return &exitError{code: exitConfig, err: errors.New("")} // each problem is printed already
			}
			return nil
		},
	}
	c.Flags().StringVar(&configFile, "config", "", "the settings file of svc serve --config")
	return c
}

// configReport is the outcome of checking one command's settings.
type configReport struct {
	summary  string   // what the settings amount to, when valid
	errs     []error  // every problem, each naming its variable
	warnings []string // settings that work but lose something
}

// print writes the warnings and problems to stderr, or the summary to
// stdout, and says whether there were problems.
func (r configReport) print(stdout, stderr io.Writer, name string) bool {
	for _, w := range r.warnings {
		fmt.Fprintf(stderr, "svc: %s: warning: %s\n", name, w)
	}
	if len(r.errs) == 0 {
		fmt.Fprintf(stdout, "%s: ok: %s\n", name, r.summary)
		return false
	}
	for _, err := range r.errs {
		fmt.Fprintf(stderr, "svc: %s: %v\n", name, err)
	}
	fmt.Fprintf(stderr, "svc: %s: %d invalid setting(s)\n", name, len(r.errs))
	return true
}

// checkServe checks the settings of svc serve, as loadConfig reads them,
// and the files they name.
func checkServe(configFile string) configReport {
	v := newViper(serveDefaults)
	if err := readConfigFile(v, configFile); err != nil {
		return configReport{errs: []error{err}}
	}
	cfg, p, err := parseConfig(v, nil)
	errs := append(slices.Clone(p.errs), splitErrors(err)...)
	if cfg.OPAURL == "" {
		if _, err := exec.LookPath(cfg.OPABin); err != nil {
			errs = append(errs, fmt.Errorf("SVC_OPA_BIN: %w", err))
		}
	}
	errs = append(errs, parentDir("SVC_HOLDS_PATH", cfg.HoldsPath), parentDir("SVC_AUDIT_LOG", cfg.AuditLog))
	policy := fmt.Sprintf("opa %s mode (%s)", cfg.OPAMode, cfg.OPABin)
	if cfg.OPAURL != "" {
		policy = "OPA server " + redactURL(cfg.OPAURL)
	}
	summary := fmt.Sprintf("listens on %s:%d, policy by %s, database %s, audit log %s",
		cfg.Host, cfg.Port, policy, orDefault(cfg.HoldsPath, "temporary"), orDefault(cfg.AuditLog, "none"))
	return configReport{summary: summary, errs: slices.DeleteFunc(errs, isNil), warnings: cfg.Warnings}
}

// checkConnector checks the settings of svc connector, as
// loadConnectorConfig reads them, and the files they name.
func checkConnector() configReport {
	cfg, p := parseConnectorConfig(newViper(connectorDefaults))
	errs := slices.Clone(p.errs)
	if _, err := cfg.toolMap(); err != nil {
		errs = append(errs, err)
	}
	if _, err := cfg.tenancy(); err != nil {
		errs = append(errs, err)
	}
	if !connector.InMemory(cfg.LedgerPath) {
		errs = append(errs, parentDir("SVC_GATEWAY_LEDGER_PATH", cfg.LedgerPath))
	}
	engineURL := "none"
	if cfg.CoreURL != nil {
		engineURL = cfg.CoreURL.Redacted()
	}
	summary := fmt.Sprintf("listens on %s:%d, engine %s, mode %s, ledger %s, tenancy map %s",
		cfg.Host, cfg.Port, engineURL, cfg.Mode, orDefault(cfg.LedgerPath, "in memory"), orDefault(cfg.TenancyFile, "none"))
	return configReport{summary: summary, errs: slices.DeleteFunc(errs, isNil), warnings: cfg.Warnings}
}

// parentDir checks that the directory a file setting names exists, since
// svc creates the file but not its directory; an unset setting is fine.
func parentDir(name, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s: the directory %s of %s does not exist", name, dir, path)
	}
	return nil
}

// splitErrors returns the errors joined in err (errors.Join), or err
// alone.
func splitErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []error{err}
}

func isNil(err error) bool { return err == nil }

// orDefault returns s, or what an empty s means.
func orDefault(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}
