package cmd

import (
	"context"
	"crypto/tls"
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
	"github.com/svc-dev/svc/engine/api"
)

// serveExitHelp is the exit-code paragraph of `svc serve --help`.
const serveExitHelp = "Exit code: 0 stopped by SIGINT or SIGTERM, 1 could not start or serve (OPA, database, audit log,\n" +
	"port), 2 invalid setting, 64 usage error."

// shutdownGrace bounds how long in-flight decisions may take at shutdown.
const shutdownGrace = 15 * time.Second

// headerTimeout bounds the wait for a request's headers; SVC_READ_TIMEOUT
// bounds the read of its body.
const headerTimeout = 10 * time.Second

// Connections and file descriptors (SVC_MAX_CONNECTIONS).
const (
	// defaultMaxConns is the cap on open connections when
	// SVC_MAX_CONNECTIONS is 0, lowered to fit the descriptor limit.
	defaultMaxConns = 1024
	// reservedFiles are the descriptors kept for svc's own files: the
	// database and its log, the audit log, OPA, syslog, the listener.
	reservedFiles = 64
)

// maxConnsFor returns the cap on open connections: configured, which must
// leave reservedFiles of the descriptor limit, or when 0 defaultMaxConns
// lowered to fit it. limit 0 means unknown.
func maxConnsFor(configured int, limit uint64) (int, error) {
	fit := defaultMaxConns
	if limit > 0 {
		fit = int(min(uint64(maxConnections), max(limit, reservedFiles+1)-reservedFiles))
	}
	switch {
	case configured == 0:
		return min(defaultMaxConns, fit), nil
	case limit > 0 && configured > fit:
		return 0, fmt.Errorf("SVC_MAX_CONNECTIONS: must leave %d of the %d file descriptors svc may open (RLIMIT_NOFILE) for its own files: at most %d, got %d",
			reservedFiles, limit, fit, configured)
	}
	return configured, nil
}

func newServeCommand() *cobra.Command {
	v := newViper(serveDefaults)
	var configFile string
	var initDB bool
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
			cfg.Init = initDB
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
	f.BoolVar(&initDB, "init", false, "create a fresh database even though the audit log already holds decisions")
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
// CPU on the decision path, and the soft limit keeps the Go heap at 40 MiB
// under steady load, which with the binary and SQLite's bounded caches
// keeps svc under 80 MiB resident (docs/performance.md, "Memory under
// steady load").
const (
	serveGCPercent   = 400
	serveMemoryLimit = 40 << 20
)

// tuneGC applies serveGCPercent and serveMemoryLimit where the environment
// does not set its own. (The C heap is bounded by package ledger.)
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
	conns, err := maxConnsFor(cfg.MaxConns, raiseFileLimit(log))
	if err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	cfg.MaxConns = conns // resolved: the hold long-polls wait on at most half (openApp)
	a, err := openApp(ctx, cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("svc cannot start")
		if ee, ok := errors.AsType[*exitError](err); ok {
			return ee
		}
		return &exitError{code: exitFailure, err: err}
	}
	defer a.Close()
	// No WriteTimeout: it would cut the long-polls of GET /v1/holds/{id}?wait=
	// (up to engine.MaxHoldWait), which end at shutdown instead. No
	// ReadTimeout either: net/http cancels a request's context when it
	// passes, whether its handler is done or not; the server bounds the read
	// of a body itself (SVC_READ_TIMEOUT, api.ServerConfig.BodyTimeout).
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: headerTimeout, IdleTimeout: 120 * time.Second}
	if err := listenTLS(srv, cfg.TLS, log); err != nil {
		return err
	}
	srv.RegisterOnShutdown(a.endWaits)
	started := func(addr string) { a.started(addr, conns) }
	return serveUntilDone(ctx, cfg.Host, cfg.Port, conns, srv, started, log, "svc shutting down: finishing in-flight decisions")
}

// serveUntilDone listens on host:port, holding at most conns connections
// open at once (api.LimitListener; 0: no cap), and serves srv, calling
// started with the address, until serving fails (exit 1) or ctx ends; it
// then shuts srv down, giving requests in flight shutdownGrace to finish.
func serveUntilDone(ctx context.Context, host string, port, conns int, srv *http.Server, started func(addr string),
	log zerolog.Logger, stopping string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("listen on %s:%d: %w", host, port, err)}
	}
	if conns > 0 {
		ln = api.LimitListener(ln, conns)
	}
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
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
