package cmd

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/svc-dev/svc/connector"
	"github.com/svc-dev/svc/connector/tenancy"
	"github.com/svc-dev/svc/ledger"
)

// maxHoldWait bounds SVC_GATEWAY_HOLD_WAIT; LiteLLM's own guardrail
// timeout is 600 s unless REQUEST_TIMEOUT raises it (docs/connector.md).
const maxHoldWait = 3600 * time.Second

// gatewayTimeout is LiteLLM's default guardrail call timeout: a hold wait
// that does not end well before it turns a hold into a gateway error.
const gatewayTimeout = 600 * time.Second

// connectorDefaults are the defaults of `svc connector`, one per key.
var connectorDefaults = map[string]any{
	"connector_host": "127.0.0.1", "connector_port": "8081", "connector_token": "",
	"connector_allow_anonymous": "false", "core_url": "", "core_token": "", "verify_ssl": "true",
	"client_timeout": "30", "gateway_tenancy_map_file": "", "gateway_tool_map_file": "",
	"gateway_hold_wait": "30", "gateway_ledger_path": "", "database_url": "", "mode": connector.ModeEnforce, "log_level": "info",
	"log_format": "json",
	"durability": string(ledger.DurabilityFull),
}

// ledgerDurabilityFull is the durability under which the gateway ledger
// syncs each commit to disk before the answer.
const ledgerDurabilityFull = ledger.DurabilityFull

// ConnectorConfig is the typed, validated configuration of `svc connector`.
type ConnectorConfig struct {
	Host           string
	Port           int
	Token          string
	AllowAnonymous bool
	CoreURL        *url.URL
	CoreToken      string
	VerifyTLS      bool
	DecideTimeout  time.Duration
	TenancyFile    string
	ToolMapFile    string
	HoldWait       time.Duration
	LedgerPath     string
	DatabaseURL    string            // postgres:// URL of a ledger shared by connectors; "" keeps SQLite at LedgerPath
	Durability     ledger.Durability // full: each ledger commit synced before the answer; os: written to the OS
	Mode           string
	LogLevel       string
	LogFormat      string   // json (one object a line) or console (for people)
	Warnings       []string // settings read as their safe default, for the start-up log
	TLS            TLSConfig
	Retention      time.Duration // SVC_RETENTION_DAYS: the age past which ledger rows go; 0 keeps them
}

// loadConnectorConfig reads and validates the connector's settings; the
// first problem names its variable.
func loadConnectorConfig(v *viper.Viper) (ConnectorConfig, error) {
	c, p := parseConnectorConfig(v)
	return c, p.first()
}

// parseConnectorConfig reads the connector's settings; the parser keeps
// every problem.
func parseConnectorConfig(v *viper.Viper) (ConnectorConfig, *parser) {
	p := &parser{v: v}
	c := ConnectorConfig{
		Host:           p.str("connector_host"),
		Port:           int(p.integer("connector_port", 0, 65535)),
		Token:          p.str("connector_token"),
		AllowAnonymous: p.boolean("connector_allow_anonymous"),
		CoreToken:      p.str("core_token"),
		VerifyTLS:      p.safetySwitch("verify_ssl"),
		DecideTimeout:  p.seconds("client_timeout", time.Second, time.Hour),
		TenancyFile:    p.str("gateway_tenancy_map_file"),
		ToolMapFile:    p.str("gateway_tool_map_file"),
		HoldWait:       p.seconds("gateway_hold_wait", 0, maxHoldWait),
		LedgerPath:     p.str("gateway_ledger_path"),
		DatabaseURL:    p.str("database_url"),
		Durability:     p.durability(),
		Mode:           strings.ToLower(p.str("mode")),
		LogLevel:       p.enum("log_level"),
		LogFormat:      p.enum("log_format"),
	}
	raw := p.str("core_url")
	u, ok := httpURL(raw)
	switch {
	case raw == "":
		p.fail("core_url", "is required: the engine's base URL, e.g. http://127.0.0.1:8080")
	case !ok:
		p.fail("core_url", "must be the engine's http(s) base URL, got %q", redactURL(raw))
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#"):
		// Not echoed: a query may hold a credential, which belongs in
		// SVC_CORE_TOKEN (the connector appends /v1/decide to the path).
		p.fail("core_url", "must be the engine's base URL without a query or fragment (a token goes in SVC_CORE_TOKEN)")
	}
	for _, key := range []string{"connector_token", "core_token"} {
		if hasSpaceOrControl(p.str(key)) {
			p.fail(key, "must not contain spaces, control or invisible characters, or invalid UTF-8: it is sent as one header value")
		}
	}
	c.CoreURL = u
	c.TLS = p.tlsSettings("connector_host", c.Host)
	c.Retention = p.retention()
	p.serverURL("core_url", u, c.TLS)
	if c.Token == "" && !c.AllowAnonymous {
		p.fail("connector_token", "is required: the gateway presents it as x-api-key (set SVC_CONNECTOR_ALLOW_ANONYMOUS=1 to run without one)")
	}
	if c.Host == "" || (net.ParseIP(c.Host) == nil && strings.ContainsAny(c.Host, " /:")) {
		p.fail("connector_host", "must be an IP address or host name, got %q", c.Host)
	}
	if c.Mode != connector.ModeEnforce && c.Mode != connector.ModeObserve {
		p.fail("mode", "must be enforce or observe, got %q", c.Mode)
	}
	p.checkDatabase(c.DatabaseURL, "SVC_GATEWAY_LEDGER_PATH (the SQLite file)", c.LedgerPath)
	if strings.ContainsRune(c.LedgerPath, '?') {
		p.fail("gateway_ledger_path", "must be a file path without '?', got %q", c.LedgerPath)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		p.fail("log_level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		p.fail("log_format", "must be json or console, got %q", c.LogFormat)
	}
	c.Warnings = p.warns
	return c, p
}

// tenancy opens the tenancy map, which must be valid at start.
func (c ConnectorConfig) tenancy() (*tenancy.Source, error) {
	tm, err := tenancy.Open(c.TenancyFile)
	if err != nil {
		return nil, fmt.Errorf("SVC_GATEWAY_TENANCY_MAP_FILE: %w", err)
	}
	return tm, nil
}

// toolMap loads the tool map, which must be valid at start.
func (c ConnectorConfig) toolMap() (*connector.ToolMap, error) {
	tm, err := connector.LoadToolMap(c.ToolMapFile)
	if err != nil {
		return nil, fmt.Errorf("SVC_GATEWAY_TOOL_MAP_FILE: %s: %w", c.ToolMapFile, err)
	}
	return tm, nil
}
