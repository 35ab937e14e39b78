package cmd

import (
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/transport"
)

// logState logs, once at start, where the engine keeps its state and how it
// is guarded, and warns about a setting that leaves it exposed: a newcomer
// who restarts the engine learns here that a temporary database took its
// holds with it.
func logState(log zerolog.Logger, cfg Config, dbPath string) {
	database := dbPath
	if cfg.HoldsPath == "" {
		database = "temporary, deleted at exit (set SVC_HOLDS_PATH to keep holds and budgets): " + dbPath
	}
	audit := cfg.AuditLog
	if audit == "" {
		audit = "none (SVC_AUDIT_LOG unset: decisions are recorded in the database only)"
	}
	log.Info().Str("database", database).Str("audit_log", audit).Str("opa_mode", opaMode(cfg)).
		Bool("auth", cfg.AuthToken != "").Bool("resolver_tokens", cfg.ResolverTokens != "").
		Bool("require_verified_approver", cfg.RequireVerify).Msg("svc state")
	if cfg.AuthToken == "" && !cfg.Gate.Enabled() && !transport.Loopback(cfg.Host) {
		log.Warn().Str("host", cfg.Host).Msg("SVC_HOST is not a loopback address and no authentication is configured " +
			"(SVC_AUTH_TOKEN, SVC_GATE_INTROSPECTION_URL): anyone who can reach the port can decide, resolve holds and freeze")
	}
	if mode, ok := exposedFile(cfg.ResolverTokens); ok {
		log.Warn().Str("mode", mode.String()).Msg("the SVC_RESOLVER_TOKENS file is readable by its group or by others: " +
			"anyone who reads it can approve holds; chmod 600 it")
	}
}

// opaMode names the evaluator in use.
func opaMode(cfg Config) string {
	if cfg.OPAURL != "" {
		return "external"
	}
	return cfg.OPAMode
}

// exposedFile returns the mode of the file SVC_RESOLVER_TOKENS names, and
// whether its group or others may read or write it. Inline tokens (a value
// starting with "{") are no file.
func exposedFile(src string) (os.FileMode, bool) {
	src = strings.TrimSpace(src)
	if src == "" || strings.HasPrefix(src, "{") {
		return 0, false
	}
	st, err := os.Stat(src)
	if err != nil {
		return 0, false // the settings check has refused an unreadable file already
	}
	return st.Mode().Perm(), st.Mode().Perm()&0o066 != 0
}
