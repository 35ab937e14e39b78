package cmd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/viper"

	"github.com/svc-dev/svc/database"
	"github.com/svc-dev/svc/engine/api"
	"github.com/svc-dev/svc/engine/opa"
	"github.com/svc-dev/svc/export"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// Bounds of the engine's settings.
const (
	minBodyBytes  = 1024
	maxBodyBytes  = 64 << 20
	maxOPATimeout = 300 * time.Second
	// maxReadTimeout bounds SVC_READ_TIMEOUT, maxConnections
	// SVC_MAX_CONNECTIONS.
	maxReadTimeout = 300 * time.Second
	maxConnections = 1_000_000
)

// Config is the typed, validated configuration of `svc serve`, read once
// from SVC_* variables, an optional config file and flags.
type Config struct {
	Host           string
	Port           int
	MaxBodyBytes   int64
	ReadTimeout    time.Duration // to receive a whole request, headers and body
	MaxConns       int           // connections open at once; 0: automatic (maxConnsFor)
	OPABin         string
	PolicyDir      string
	OPATimeout     time.Duration
	OPAMode        string // eval (one opa eval per decision) or server (a supervised opa run --server)
	OPAEvalSpares  int    // eval mode: opa eval processes started ahead of the decisions
	OPAURL         string // an OPA server svc does not manage; overrides OPAMode
	OPAToken       string // bearer token sent to OPAURL's server (--authentication=token)
	Window         time.Duration
	AuditLog       string
	HoldsPath      string
	DatabaseURL    string            // postgres:// URL of a PostgreSQL database shared by replicas; "" keeps SQLite at HoldsPath
	Durability     ledger.Durability // when an answered decision counts as stored: full or os
	HoldTTL        time.Duration
	Freeze         bool
	AuthToken      string
	LogLevel       string // debug, info, warn or error
	LogFormat      string // json (one object a line) or console (for people)
	ResolverTokens string
	RequireVerify  bool
	ResolutionPol  string
	Gate           api.GateConfig
	Export         export.Config
	TLS            TLSConfig     // the listener's certificate, the CA of the OPA client, plain HTTP off loopback
	Retention      time.Duration // SVC_RETENTION_DAYS: the age past which settled holds and audit mirror rows go; 0 keeps them
	UIEnabled      bool          // SVC_UI_ENABLED: serve the reviewers' web app under /ui/
	PublicURL      string        // SVC_PUBLIC_URL: the engine's base URL as reviewers reach it, no trailing "/"; "" unset
	// Init is --init, never read from the environment or a settings
	// file: creating a fresh database beside an audit log that already
	// holds decisions is intended (checkFreshDatabase).
	Init     bool
	Warnings []string // settings read as their safe default, for the start-up log
}

// serveDefaults are the defaults of spec §8, one per key, so that viper
// reads every key from the environment.
var serveDefaults = map[string]any{
	"host": "127.0.0.1", "port": "8080", "max_body_bytes": "262144", "opa_bin": "opa",
	"read_timeout": "10", "max_connections": "0",
	"policy_dir": "", "opa_timeout": "10", "opa_mode": "eval", "opa_eval_spares": "1", "opa_url": "", "opa_token": "", "window_seconds": "3600",
	"audit_log": "", "holds_path": "", "database_url": "", "durability": string(ledger.DurabilityFull), "hold_ttl_seconds": "14400", "freeze": "false", "auth_token": "",
	"log_level": "info", "log_format": "json", "resolver_tokens": "", "require_verified_approver": "true", "resolution_policy": "",
	"gate_introspection_url": "", "gate_introspection_auth": "", "gate_introspection_ca_bundle": "",
	"gate_introspection_cache_seconds": strconv.Itoa(api.DefaultGateCacheSeconds),
	"gate_introspection_timeout":       strconv.FormatFloat(api.DefaultGateTimeout.Seconds(), 'f', -1, 64),
	"syslog_enabled":                   "false", "syslog_address": "", "syslog_protocol": export.ProtocolUDP,
	"syslog_format": export.FormatJSON, "syslog_facility": export.DefaultFacility, "syslog_tls_verify": "true",
	"syslog_tls_ca": "", "webhook_url": "", "webhook_queue_size": strconv.Itoa(export.DefaultQueueSize),
	"syslog_max_message": strconv.Itoa(export.DefaultMaxMessage),
	"webhook_secret":     "",
	"ui_enabled":         "true", "public_url": "",
}

// newViper returns a viper reading SVC_* variables with every default set.
func newViper(defaults map[string]any) *viper.Viper {
	v := viper.New()
	v.SetEnvPrefix("SVC")
	v.AutomaticEnv()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	return v
}

// envName is the variable a key is read from, for error messages.
func envName(key string) string { return "SVC_" + strings.ToUpper(key) }

// parser reads keys from viper and keeps its errors, each naming the
// variable at fault, or the flag that set it.
type parser struct {
	v     *viper.Viper
	errs  []error
	flags map[string]string // key → name of the flag that set it on the command line
	warns []string          // values read as a default rather than refused (safetySwitch)
}

func (p *parser) fail(key, format string, args ...any) {
	name := envName(key)
	if flag, ok := p.flags[key]; ok {
		name = "--" + flag + " (" + name + ")"
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// first returns the first error, or nil.
func (p *parser) first() error {
	if len(p.errs) == 0 {
		return nil
	}
	return p.errs[0]
}

func (p *parser) str(key string) string { return strings.TrimSpace(p.v.GetString(key)) }

// enum reads a setting of a closed set of words; like the booleans, every
// such setting is read in any case.
func (p *parser) enum(key string) string { return strings.ToLower(p.str(key)) }

func (p *parser) integer(key string, lo, hi int64) int64 {
	s := p.str(key)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		p.fail(key, "must be an integer from %d to %d, got %q", lo, hi, s)
		return lo // in range, so that a later check of the value does not report the variable twice
	}
	return n
}

func (p *parser) seconds(key string, lo, hi time.Duration) time.Duration {
	s := p.str(key)
	f, err := strconv.ParseFloat(s, 64)
	d := time.Duration(f * float64(time.Second))
	if err != nil || d < lo || d > hi {
		p.fail(key, "must be a number of seconds from %v to %v, got %q", lo.Seconds(), hi.Seconds(), s)
	}
	return d
}

// boolean reads a true/false setting. Every boolean has a default, so an
// unset one reads as that; a blank value (a settings file's "freeze: \"\"",
// a variable of spaces) is refused like any other word, rather than read as
// false: for SVC_SYSLOG_TLS_VERIFY that would turn certificate checks off,
// and for SVC_FREEZE override a settings file's freeze.
func (p *parser) boolean(key string) bool {
	b, ok, s := p.word(key)
	if !ok {
		p.fail(key, "must be true or false, got %q", s)
	}
	return b
}

// word reads key as a boolean word, in any case: its value, whether it is
// one, and the lower-cased text.
func (p *parser) word(key string) (value, ok bool, text string) {
	s := strings.ToLower(p.str(key))
	switch s {
	case "true", "1", "yes", "on":
		return true, true, s
	case "false", "0", "no", "off":
		return false, true, s
	}
	return false, false, s
}

// safetySwitch reads a boolean whose safe value is true
// (SVC_REQUIRE_VERIFIED_APPROVER, SVC_VERIFY_SSL): as the spec says, a
// value that is not a boolean reads as true, so that a misspelled "flase"
// never turns the check off; unlike the spec's silent fallback, a warning
// says so.
func (p *parser) safetySwitch(key string) bool {
	b, ok, s := p.word(key)
	if ok {
		return b
	}
	p.warns = append(p.warns, fmt.Sprintf("%s=%q is not true or false: read as true, the check stays on; "+
		"set it to true or false", envName(key), s))
	return true
}

// durability reads SVC_DURABILITY.
func (p *parser) durability() ledger.Durability {
	d, err := ledger.ParseDurability(p.str("durability"))
	if err != nil {
		p.fail("durability", "%v", err)
	}
	return d
}

// loadConfig reads and validates the serve configuration; flags maps the
// keys set by a command-line flag to its name, for the error messages.
func loadConfig(v *viper.Viper, flags map[string]string) (Config, error) {
	c, p, err := parseConfig(v, flags)
	return c, errors.Join(p.first(), err)
}

// parseConfig reads the serve configuration: the parser keeps every
// problem of the settings, err every problem of the export settings.
func parseConfig(v *viper.Viper, flags map[string]string) (Config, *parser, error) {
	p := &parser{v: v, flags: flags}
	c := Config{
		Host:           p.str("host"),
		Port:           int(p.integer("port", 0, 65535)),
		MaxBodyBytes:   p.integer("max_body_bytes", minBodyBytes, maxBodyBytes),
		ReadTimeout:    p.seconds("read_timeout", 100*time.Millisecond, maxReadTimeout),
		MaxConns:       int(p.integer("max_connections", 0, maxConnections)),
		OPABin:         p.str("opa_bin"),
		PolicyDir:      p.str("policy_dir"),
		OPATimeout:     p.seconds("opa_timeout", 10*time.Millisecond, maxOPATimeout),
		OPAMode:        p.enum("opa_mode"),
		OPAEvalSpares:  int(p.integer("opa_eval_spares", 0, opa.MaxEvalSpares)),
		OPAURL:         p.str("opa_url"),
		OPAToken:       p.str("opa_token"),
		Window:         time.Duration(p.integer("window_seconds", 1, 366*24*3600)) * time.Second,
		AuditLog:       p.str("audit_log"),
		HoldsPath:      p.str("holds_path"),
		DatabaseURL:    p.str("database_url"),
		Durability:     p.durability(),
		HoldTTL:        time.Duration(p.integer("hold_ttl_seconds", 1, 366*24*3600)) * time.Second,
		Freeze:         p.boolean("freeze"),
		AuthToken:      p.str("auth_token"),
		LogLevel:       p.enum("log_level"),
		LogFormat:      p.enum("log_format"),
		ResolverTokens: p.str("resolver_tokens"),
		RequireVerify:  p.safetySwitch("require_verified_approver"),
		ResolutionPol:  p.str("resolution_policy"),
		UIEnabled:      p.boolean("ui_enabled"),
		PublicURL:      p.publicURL(),
		Gate: api.GateConfig{
			URL:          p.str("gate_introspection_url"),
			Auth:         p.str("gate_introspection_auth"),
			CABundle:     p.str("gate_introspection_ca_bundle"),
			CacheSeconds: int(p.integer("gate_introspection_cache_seconds", 0, api.MaxGateCacheSeconds)),
			Timeout:      p.seconds("gate_introspection_timeout", time.Millisecond, api.MaxGateTimeout),
		},
	}
	c.TLS = p.tlsSettings("host", c.Host)
	c.Retention = p.retention()
	p.check(c)
	c.Warnings = p.warns
	var err error
	c.Export, err = readExport(v)
	return c, p, err
}

// publicURL reads SVC_PUBLIC_URL: empty, or an absolute http(s) URL with
// no query, fragment or user information; a trailing "/" is dropped.
func (p *parser) publicURL() string {
	raw := p.str("public_url")
	if raw == "" {
		return ""
	}
	u, ok := httpURL(raw)
	if !ok || u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.HasSuffix(u.Host, ":") {
		p.fail("public_url", "must be the http(s) base URL reviewers reach the engine at, without query, fragment or password, e.g. https://svc.example.com, got %q",
			redactURL(raw))
		return ""
	}
	return strings.TrimSuffix(raw, "/")
}

// readExport reads and validates the SVC_SYSLOG_* and SVC_WEBHOOK_*
// settings. Unlike the other settings, whose first problem stops start-up,
// every problem of these is reported at once (docs/configuration.md).
func readExport(v *viper.Viper) (export.Config, error) {
	p := &parser{v: v}
	c := export.Config{
		Syslog: export.SyslogConfig{
			Enabled:               p.boolean("syslog_enabled"),
			Address:               p.str("syslog_address"),
			Protocol:              p.enum("syslog_protocol"),
			Format:                p.enum("syslog_format"),
			Facility:              p.str("syslog_facility"),
			TLSCA:                 p.str("syslog_tls_ca"),
			TLSInsecureSkipVerify: !p.boolean("syslog_tls_verify"),
			MaxMessage:            int(p.integer("syslog_max_message", export.MinMaxMessage, export.MaxMaxMessage)),
		},
		Webhook: export.WebhookConfig{
			URL:       p.str("webhook_url"),
			QueueSize: int(p.integer("webhook_queue_size", 1, export.MaxQueueSize)),
			Secret:    p.str("webhook_secret"),
		},
	}
	c.SetDefaults()
	return c, errors.Join(append(p.errs, c.Validate())...)
}

// checkLocalOPA checks the settings of an OPA that svc runs itself.
func (p *parser) checkLocalOPA(c Config) {
	if c.OPABin == "" {
		p.fail("opa_bin", "must name the opa binary")
	}
	if c.PolicyDir != "" {
		if st, err := os.Stat(c.PolicyDir); err != nil || !st.IsDir() {
			p.fail("policy_dir", "must be an existing directory, got %q", c.PolicyDir)
		}
	}
}

// checkDatabase checks SVC_DATABASE_URL, url: a postgres:// or
// postgresql:// URL that parses, and not set beside the SQLite file it
// replaces (file, named by fileVar).
func (p *parser) checkDatabase(url, fileVar, file string) {
	if url == "" {
		return
	}
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		p.fail("database_url", "must be a postgres:// or postgresql:// URL")
		return
	}
	if _, err := pgx.ParseConfig(url); err != nil {
		p.fail("database_url", "must be a valid PostgreSQL URL: %s", database.Redact(url))
		return
	}
	if file != "" {
		p.fail("database_url", "replaces %s; set only one of them", fileVar)
	}
}

// checkOPAToken checks SVC_OPA_TOKEN, never echoing it: it is only sent
// to SVC_OPA_URL's server, as one header value.
func (p *parser) checkOPAToken(c Config) {
	switch {
	case c.OPAToken == "":
	case c.OPAURL == "":
		p.fail("opa_token", "is sent only to the OPA server of SVC_OPA_URL, which is unset")
	case hasSpaceOrControl(c.OPAToken):
		p.fail("opa_token", "must not contain spaces, control or invisible characters, or invalid UTF-8")
	}
}

// hasSpaceOrControl reports whether a token holds a space, a control or
// format character (U+0085, a zero-width space) or invalid UTF-8: no
// header value carries them as sent, and a token that looks like another
// is no token.
func hasSpaceOrControl(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsGraphic(r) })
}

func (p *parser) check(c Config) {
	if c.Host == "" || (net.ParseIP(c.Host) == nil && strings.ContainsAny(c.Host, " /:")) {
		p.fail("host", "must be an IP address or host name, got %q", c.Host)
	}
	if c.OPAURL == "" { // else neither is used: SVC_OPA_URL's server runs itself, with its own pack
		p.checkLocalOPA(c)
	}
	if c.OPAMode != "eval" && c.OPAMode != "server" {
		p.fail("opa_mode", "must be eval or server, got %q", c.OPAMode)
	}
	if u, ok := httpURL(c.OPAURL); c.OPAURL != "" && !ok {
		p.fail("opa_url", "must be an http(s) URL of an OPA server, got %q", redactURL(c.OPAURL))
	} else {
		p.serverURL("opa_url", u, c.TLS)
	}
	p.checkOPAToken(c)
	if err := c.Gate.Validate(); err != nil {
		p.errs = append(p.errs, err)
	}
	p.checkDatabase(c.DatabaseURL, "SVC_HOLDS_PATH (the SQLite file)", c.HoldsPath)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		p.fail("log_level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		p.fail("log_format", "must be json or console, got %q", c.LogFormat)
	}
	if err := c.holdsConfig().Validate(); err != nil {
		p.errs = append(p.errs, err) // it names SVC_RESOLVER_TOKENS or SVC_RESOLUTION_POLICY
	}
}

// holdsConfig is the hold resolution part of c.
func (c Config) holdsConfig() holds.Config {
	return holds.Config{ResolverTokens: c.ResolverTokens, RequireVerified: c.RequireVerify, ResolutionPolicy: c.ResolutionPol}
}
