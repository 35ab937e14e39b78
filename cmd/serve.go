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
	"github.com/spf13/viper"
)

// shutdownGrace bounds how long in-flight decisions may take at shutdown.
const shutdownGrace = 15 * time.Second

func newServeCommand() *cobra.Command {
	v := newViper(serveDefaults)
	var configFile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the decision engine (POST /v1/decide, holds, health)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := readConfigFile(v, configFile); err != nil {
				return &exitError{code: 2, err: err}
			}
			cfg, err := loadConfig(v)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("invalid configuration: %w", err)}
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
	f.String("holds-path", "", "SQLite database path (SVC_HOLDS_PATH)")
	for key, flag := range map[string]string{"host": "host", "port": "port", "policy_dir": "policy-dir",
		"opa_bin": "opa-bin", "audit_log": "audit-log", "holds_path": "holds-path"} {
		_ = v.BindPFlag(key, f.Lookup(flag)) // the flag exists: defined just above
	}
	return c
}

// readConfigFile merges an optional settings file under env and flags.
func readConfigFile(v *viper.Viper, path string) error {
	if path == "" {
		return nil
	}
	v.SetConfigFile(path)
	if err := v.ReadInConfig(); err != nil {
		return fmt.Errorf("read config file %s: %w", path, err)
	}
	return nil
}

func newLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
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
	log := newLogger(stderr, cfg.LogLevel)
	tuneGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, err := openApp(ctx, cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("svc cannot start")
		return &exitError{code: 1, err: err}
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
		return &exitError{code: 1, err: fmt.Errorf("listen on %s:%d: %w", host, port, err)}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	started(ln.Addr().String())
	select {
	case err = <-served:
		return &exitError{code: 1, err: fmt.Errorf("serve: %w", err)}
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
