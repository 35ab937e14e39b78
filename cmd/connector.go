package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/connector"
	gwledger "github.com/svc-dev/svc/connector/ledger"
	"github.com/svc-dev/svc/connector/tenancy"
	"github.com/svc-dev/svc/metrics"
)

// ledgerExitHelp is the exit-code paragraph of `svc connector ledger --help`.
const ledgerExitHelp = "Exit code: 0 listed, 1 the ledger cannot be read, 2 SVC_GATEWAY_LEDGER_PATH unset, 64 usage error."

// tenancyPoll is how often the tenancy map file is checked for changes.
const tenancyPoll = time.Second

func newConnectorCommand() *cobra.Command {
	v := newViper(connectorDefaults)
	c := &cobra.Command{
		Use:   "connector",
		Short: "Run the LiteLLM guardrail connector (POST /beta/litellm_basic_guardrail_api, POST /v1/gateway/tool-calls)",
		Long: "Run the LiteLLM guardrail connector (docs/connector.md), configured by SVC_* variables and flags.\n" +
			"Exit code: 0 stopped by SIGINT or SIGTERM, 1 could not start or serve, 2 invalid setting, 64 usage error.",
		Args: argsOf(0, "no argument, or the subcommand ledger"),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := loadConnectorConfig(v)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("invalid configuration: %w", err)}
			}
			return runConnector(c.Context(), cfg, c.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.String("host", "", "bind address (SVC_CONNECTOR_HOST)")
	f.Int("port", 0, "bind port (SVC_CONNECTOR_PORT; 0 picks a free port)")
	_ = v.BindPFlag("connector_host", f.Lookup("host")) // the flags exist: defined just above
	_ = v.BindPFlag("connector_port", f.Lookup("port"))
	c.AddCommand(newConnectorLedgerCommand())
	return c
}

// runConnector serves until SIGINT or SIGTERM.
func runConnector(ctx context.Context, cfg ConnectorConfig, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat).With().Str("component", "connector").Logger()
	for _, w := range append(cfg.Warnings, unknownVariables(os.Environ())...) {
		log.Warn().Msg(w)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tools, err := cfg.toolMap()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	tm, err := cfg.tenancy()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if cfg.DatabaseURL == "" { // PostgreSQL orders its writers itself
		lock, err := lockWriter(ledgerFile(cfg.LedgerPath), "SVC_GATEWAY_LEDGER_PATH")
		if err != nil {
			return err
		}
		defer lock.Close()
	}
	led, err := openGatewayLedger(ctx, cfg.DatabaseURL, cfg.LedgerPath, cfg.Durability == ledgerDurabilityFull)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer led.Close()
	warnings(log, cfg, tm)
	go retain(ctx, cfg.Retention, log, "gateway ledger", led.Prune)
	srv, decider := buildConnector(cfg, tools, tm, led, log)
	defer decider.Close()
	go tm.Watch(ctx, tenancyPoll, func(changed bool, err error) {
		if err != nil {
			log.Error().Err(err).Msg("tenancy map not reloaded; the last good map stays in force")
			return
		}
		log.Info().Int("orgs", tm.Status().Orgs).Msg("tenancy map reloaded")
	})
	// No WriteTimeout: a gateway request may wait SVC_GATEWAY_HOLD_WAIT on a hold.
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	if err := listenTLS(hs, cfg.TLS, log); err != nil {
		return err
	}
	return serveUntilDone(ctx, cfg.Host, cfg.Port, 0, hs, func(addr string) {
		log.Info().Str("addr", addr).Str("core_url", cfg.CoreURL.Redacted()).Str("mode", cfg.Mode).
			Float64("hold_wait_seconds", cfg.HoldWait.Seconds()).Msg("svc connector serving")
	}, log, "svc connector shutting down: finishing requests in flight")
}

// ledgerFile is the file of the gateway ledger at path, "" when it is in
// memory.
func ledgerFile(path string) string {
	if connector.InMemory(path) {
		return ""
	}
	return path
}

// buildConnector wires the governor and the HTTP side.
func buildConnector(cfg ConnectorConfig, tools *connector.ToolMap, tm *tenancy.Source, led *gwledger.Ledger,
	log zerolog.Logger) (*connector.Server, *connector.HTTPDecider) {
	counters := &connector.Counters{}
	m := metrics.NewConnector(connector.CounterNames, counters.Snapshot)
	decider := connector.NewHTTPDecider(cfg.CoreURL, cfg.CoreToken, cfg.VerifyTLS, cfg.DecideTimeout)
	decider.UseRootCAs(cfg.TLS.roots)
	gov := connector.NewGovernor(connector.GovernorConfig{Mode: cfg.Mode, HoldWait: cfg.HoldWait, DecideTimeout: cfg.DecideTimeout, Decider: decider,
		Tenancy: tm, Tools: tools, Ledger: led, Counters: counters, Observer: m, Log: log})
	srv := connector.NewServer(connector.ServerConfig{Token: cfg.Token, Version: Version, CoreURL: cfg.CoreURL.Redacted(),
		HoldWait: cfg.HoldWait, Mode: cfg.Mode, LedgerPath: cfg.LedgerPath, Tenancy: tm, Counters: counters,
		Observer: m, Metrics: m.Handler(), Log: log, Governor: gov})
	return srv, decider
}

// warnings logs the settings that work but lose something.
func warnings(log zerolog.Logger, cfg ConnectorConfig, tm *tenancy.Source) {
	if cfg.Token == "" {
		log.Warn().Msg("SVC_CONNECTOR_ALLOW_ANONYMOUS: the connector accepts requests without a token")
	}
	if cfg.DatabaseURL == "" && connector.InMemory(cfg.LedgerPath) {
		log.Warn().Msg("SVC_GATEWAY_LEDGER_PATH is unset or in memory: the gateway ledger is lost at exit")
	}
	if !tm.Status().Loaded {
		log.Warn().Msg("SVC_GATEWAY_TENANCY_MAP_FILE is unset: every caller is refused as unmapped")
	}
	if connector.MaxAnswer(cfg.HoldWait, cfg.DecideTimeout) >= gatewayTimeout-5*time.Second {
		log.Warn().Float64("hold_wait_seconds", cfg.HoldWait.Seconds()).Float64("client_timeout_seconds", cfg.DecideTimeout.Seconds()).
			Msg("SVC_GATEWAY_HOLD_WAIT plus twice SVC_CLIENT_TIMEOUT reaches LiteLLM's 600 s guardrail timeout: a held call or a slow engine ends as a gateway error; raise REQUEST_TIMEOUT or lower them")
	}
	if cfg.Mode == connector.ModeObserve {
		log.Warn().Msg("SVC_MODE=observe: nothing is blocked; the ledger records what enforce would have done")
	}
}

func newConnectorLedgerCommand() *cobra.Command {
	var out outputFlag
	var limit int
	v := newViper(connectorDefaults)
	c := &cobra.Command{
		Use:   "ledger",
		Short: "List the most recent gateway ledger rows (SVC_GATEWAY_LEDGER_PATH), newest first",
		Long:  "List the most recent gateway ledger rows (SVC_GATEWAY_LEDGER_PATH), newest first.\n" + ledgerExitHelp,
		Args:  argsOf(0, "no argument"),
		PreRunE: func(*cobra.Command, []string) error {
			if limit < 1 || limit > 10000 {
				return fmt.Errorf("--limit must be from 1 to 10000, got %d", limit)
			}
			return out.validate()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			p := &parser{v: v}
			path, url := p.str("gateway_ledger_path"), p.str("database_url")
			p.checkDatabase(url, "SVC_GATEWAY_LEDGER_PATH (the SQLite file)", path)
			if err := p.first(); err != nil {
				return &exitError{code: 2, err: err}
			}
			if url == "" && connector.InMemory(path) {
				return &exitError{code: 2, err: errors.New("SVC_GATEWAY_LEDGER_PATH: must name the ledger file of the connector (or SVC_DATABASE_URL its database)")}
			}
			if url == "" {
				// Opening a missing file would create an empty ledger, and
				// list nothing where the operator expects rows.
				if _, err := os.Stat(path); err != nil {
					return &exitError{code: 1, err: fmt.Errorf("SVC_GATEWAY_LEDGER_PATH: no ledger to read at %s (the connector creates it when it starts): %w", path, err)}
				}
			}
			led, err := openGatewayLedger(c.Context(), url, path, true)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			defer led.Close()
			rows, err := led.Recent(c.Context(), limit)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if out.format == "json" {
				return failure(writeIndented(c.OutOrStdout(), rows))
			}
			return failure(ledgerTable(c.OutOrStdout(), rows))
		},
	}
	out.register(c)
	c.Flags().IntVar(&limit, "limit", 50, "rows to list, 1-10000")
	return c
}

// ledgerTable prints ledger rows as an aligned table. Tool names and call
// ids come from the model: one holding a control character (a line feed
// forging a row, a terminal escape) or another unprintable one is printed
// quoted, escaped.
func ledgerTable(w io.Writer, rows []connector.Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tOUTCOME\tSTAGE\tRULE\tORG\tTOOL\tTOOL CALL\tHOLD\tRELEASED\tTRANSPORT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%t\t%s\n", r.Time.Format(time.RFC3339), printable(r.Outcome),
			printable(r.EnforcementStage), printable(r.Rule), printable(orDash(r.Org)), printable(r.Tool),
			printable(r.ToolCallID), printable(orDash(r.HoldID)), r.ReleasedAfterApproval, printable(r.Transport))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "(no rows)")
		return err
	}
	return nil
}

// printable is s, or s quoted with its unprintable characters escaped
// when it has any (or a space, which would misalign the table).
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) {
		return strconv.QuoteToGraphic(s)
	}
	return s
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// openGatewayLedger opens the gateway ledger in the PostgreSQL database at
// url (SVC_DATABASE_URL) or else the SQLite file at path.
func openGatewayLedger(ctx context.Context, url, path string, synced bool) (*gwledger.Ledger, error) {
	if url != "" {
		return gwledger.OpenPostgres(ctx, url)
	}
	return gwledger.Open(ctx, path, synced)
}
