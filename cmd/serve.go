package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// serveExitHelp is the exit-code paragraph of `svc serve --help`.
const serveExitHelp = "Exit code: 0 stopped by SIGINT or SIGTERM, 1 could not start or serve (OPA, database, audit log,\n" +
	"port), 2 invalid setting, 64 usage error."

// shutdownGrace bounds how long in-flight decisions may take at shutdown.
const shutdownGrace = 15 * time.Second

func newServeCommand() *cobra.Command {
	v := newViper(serveDefaults)
	var configFile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the decision engine (POST /v1/decide, holds, health)",
		Long: "Run the decision engine (POST /v1/decide, holds, /healthz, /readyz) configured by SVC_* variables,\n" +
			"--config and flags (docs/configuration.md).\n" + serveExitHelp,
		Args: argsOf(0, "no argument (settings are SVC_* variables, --config or flags)"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := readConfigFile(v, configFile); err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			cfg, err := loadConfig(v, changedFlags(c.Flags(), serveFlags))
			if err != nil {
				return &exitError{code: exitConfig, err: fmt.Errorf("invalid configuration: %w", err)}
			}
			return runServe(c.Context(), cfg, c.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.StringVar(&configFile, "config", "", "YAML, JSON or TOML file of settings (keys as the SVC_ names without prefix, lower case)")
	f.String("host", "", "bind address (SVC_HOST)")
	f.Int("port", 0, "bind port (SVC_PORT; 0 picks a free port)")
	f.String("policy-dir", "", "directory of the policy pack (SVC_POLICY_DIR)")
	f.String("opa-bin", "", "opa binary (SVC_OPA_BIN)")
	f.String("audit-log", "", "append-only JSONL audit log (SVC_AUDIT_LOG)")
	f.String("holds-path", "", "SQLite database path (SVC_HOLDS_PATH; default a temporary database, deleted at exit)")
	f.String("log-level", "", "debug, info, warn or error (SVC_LOG_LEVEL)")
	f.String("log-format", "", "json or console (SVC_LOG_FORMAT)")
	for key, flag := range serveFlags {
		_ = v.BindPFlag(key, f.Lookup(flag)) // the flag exists: defined just above
	}
	return c
}

// serveFlags maps the settings a flag of `svc serve` sets to the flag.
var serveFlags = map[string]string{"host": "host", "port": "port", "policy_dir": "policy-dir",
	"opa_bin": "opa-bin", "audit_log": "audit-log", "holds_path": "holds-path", "log_level": "log-level",
	"log_format": "log-format"}

// changedFlags returns the part of flags (key → flag) set on the command
// line.
func changedFlags(set *pflag.FlagSet, flags map[string]string) map[string]string {
	out := map[string]string{}
	for key, flag := range flags {
		if set.Changed(flag) {
			out[key] = flag
		}
	}
	return out
}

// readConfigFile merges an optional settings file under env and flags; a
// key that is not a setting is an error.
func readConfigFile(v *viper.Viper, path string) error {
	if path == "" {
		return nil
	}
	if err := checkFileKeys(path, serveDefaults); err != nil {
		return err
	}
	v.SetConfigFile(path)
	if err := v.ReadInConfig(); err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	return nil
}

// newLogger returns svc's logger: one JSON object a line, or with format
// console, aligned text for people.
func newLogger(w io.Writer, level, format string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("service", "svc").Logger()
}

// serveGCPercent and serveMemoryLimit tune the Go garbage collector of
// `svc serve` unless GOGC or GOMEMLIMIT are set: a decision allocates a few
// tens of KiB that die at once, so collecting four times less often saves
// CPU on the decision path, and the soft limit keeps the heap well inside
// the 100 MiB the engine is sized for (docs/performance.md).
const (
	serveGCPercent   = 400
	serveMemoryLimit = 64 << 20
)

// tuneGC applies serveGCPercent and serveMemoryLimit where the environment
// does not set its own.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
}

func runServe(ctx context.Context, cfg Config, stderr io.Writer) error {
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	for _, w := range append(cfg.Warnings, unknownVariables(os.Environ())...) {
		log.Warn().Msg(w)
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, err := openApp(ctx, cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("svc cannot start")
		return &exitError{code: exitFailure, err: err}
	}
	defer a.Close()
	// No WriteTimeout: it would cut the long-polls of GET /v1/holds/{id}?wait=
	// (up to engine.MaxHoldWait), which end at shutdown instead.
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	srv.RegisterOnShutdown(a.endWaits)
	return serveUntilDone(ctx, cfg.Host, cfg.Port, srv, a.started, log, "svc shutting down: finishing in-flight decisions")
}

// serveUntilDone listens on host:port and serves srv, calling started with
// the address, until serving fails (exit 1) or ctx ends; it then shuts srv
// down, giving requests in flight shutdownGrace to finish.
func serveUntilDone(ctx context.Context, host string, port int, srv *http.Server, started func(addr string),
	log zerolog.Logger, stopping string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("listen on %s:%d: %w", host, port, err)}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	started(ln.Addr().String())
	select {
	case err = <-served:
		return &exitError{code: exitFailure, err: fmt.Errorf("serve: %w", err)}
	case <-ctx.Done():
	}
	log.Info().Msg(stopping)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error().Err(err).Msg("shutdown incomplete")
	}
	return nil
}
