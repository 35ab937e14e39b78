package export

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	assert.Equal(t, Config{
		DrainTimeout: DefaultDrainTimeout,
		Syslog:       SyslogConfig{Protocol: "udp", Format: "json", Facility: "local0", QueueSize: 1000, MaxMessage: 8096},
		Webhook:      WebhookConfig{QueueSize: 1000, Timeout: 5 * time.Second, MaxAttempts: 3, RetryBackoff: 500 * time.Millisecond},
	}, c)
	require.NoError(t, c.Validate())
	assert.False(t, c.Syslog.TLSInsecureSkipVerify, "verification is on by default")
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	caFile, _, _ := writeTestPKI(t, dir)
	notPEM := filepath.Join(dir, "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	bigFile := filepath.Join(dir, "big.pem")
	require.NoError(t, os.WriteFile(bigFile, make([]byte, 1<<20+1), 0o600))
	valid := func() Config {
		c := Config{
			Syslog:  SyslogConfig{Enabled: true, Address: "logs.example.com:6514", Protocol: "tls", Format: "cef", Facility: "auth"},
			Webhook: WebhookConfig{URL: "https://hooks.example.com/svc"},
		}
		c.SetDefaults()
		return c
	}
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // "" = valid
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "disabled syslog needs no address", change: func(c *Config) { c.Syslog.Enabled, c.Syslog.Address = false, "" }},
		{name: "enabled syslog needs an address", change: func(c *Config) { c.Syslog.Address = "" },
			want: "SVC_SYSLOG_ADDRESS: required when SVC_SYSLOG_ENABLED is true"},
		{name: "address without port", change: func(c *Config) { c.Syslog.Address = "logs.example.com" },
			want: `SVC_SYSLOG_ADDRESS: must be host:port, got "logs.example.com"`},
		{name: "address with bad port", change: func(c *Config) { c.Syslog.Address = "logs:99999" },
			want: `SVC_SYSLOG_ADDRESS: port must be 1-65535, got "99999"`},
		{name: "protocol", change: func(c *Config) { c.Syslog.Protocol = "relp" },
			want: `SVC_SYSLOG_PROTOCOL: must be udp, tcp or tls, got "relp"`},
		{name: "format", change: func(c *Config) { c.Syslog.Format = "leef" },
			want: `SVC_SYSLOG_FORMAT: must be json or cef, got "leef"`},
		{name: "facility", change: func(c *Config) { c.Syslog.Facility = "local8" },
			want: `SVC_SYSLOG_FACILITY: unknown facility "local8"`},
		{name: "syslog queue", change: func(c *Config) { c.Syslog.QueueSize = -1 },
			want: "syslog queue size: must be between 1 and 100000, got -1"},
		{name: "syslog message size too small", change: func(c *Config) { c.Syslog.MaxMessage = 480 },
			want: "SVC_SYSLOG_MAX_MESSAGE: must be between 2048 and 65507 octets, got 480"},
		{name: "syslog message size too large", change: func(c *Config) { c.Syslog.MaxMessage = 65508 },
			want: "SVC_SYSLOG_MAX_MESSAGE: must be between 2048 and 65507 octets, got 65508"},
		{name: "tls ca", change: func(c *Config) { c.Syslog.TLSCA = caFile }},
		{name: "tls ca missing", change: func(c *Config) { c.Syslog.TLSCA = filepath.Join(dir, "nope.pem") },
			want: "SVC_SYSLOG_TLS_CA: open " + filepath.Join(dir, "nope.pem")},
		{name: "tls ca not PEM", change: func(c *Config) { c.Syslog.TLSCA = notPEM },
			want: "SVC_SYSLOG_TLS_CA: no PEM certificate in " + notPEM},
		{name: "tls ca a directory", change: func(c *Config) { c.Syslog.TLSCA = dir },
			want: "SVC_SYSLOG_TLS_CA: " + dir + " is not a regular file"},
		{name: "tls ca a device", change: func(c *Config) { c.Syslog.TLSCA = "/dev/zero" },
			want: "SVC_SYSLOG_TLS_CA: /dev/zero is not a regular file"},
		{name: "tls ca too large", change: func(c *Config) { c.Syslog.TLSCA = bigFile },
			want: "SVC_SYSLOG_TLS_CA: " + bigFile + " is larger than 1048576 bytes"},
		{name: "tls ca checked even when syslog is off", change: func(c *Config) { c.Syslog.Enabled, c.Syslog.TLSCA = false, notPEM },
			want: "SVC_SYSLOG_TLS_CA: no PEM certificate"},
		{name: "webhook scheme", change: func(c *Config) { c.Webhook.URL = "ftp://hooks.example.com/x" },
			want: `SVC_WEBHOOK_URL: scheme must be http or https, got "ftp"`},
		{name: "webhook relative", change: func(c *Config) { c.Webhook.URL = "/hooks" },
			want: `SVC_WEBHOOK_URL: scheme must be http or https, got ""`},
		{name: "webhook without host", change: func(c *Config) { c.Webhook.URL = "https:///x" },
			want: "SVC_WEBHOOK_URL: missing host"},
		{name: "webhook url never echoed", change: func(c *Config) { c.Webhook.URL = "https://h/x?token=sekrit\x7f" },
			want: "SVC_WEBHOOK_URL: not a valid URL"},
		{name: "webhook queue", change: func(c *Config) { c.Webhook.QueueSize = 100001 },
			want: "SVC_WEBHOOK_QUEUE_SIZE: must be between 1 and 100000, got 100001"},
		{name: "webhook attempts", change: func(c *Config) { c.Webhook.MaxAttempts = 11 },
			want: "webhook attempts: must be between 1 and 10, got 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "sekrit")
		})
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	c := Config{
		Syslog:  SyslogConfig{Enabled: true, Protocol: "x", Format: "y", Facility: "z", TLSCA: filepath.Join(t.TempDir(), "nope.pem")},
		Webhook: WebhookConfig{QueueSize: -1},
	}
	c.SetDefaults()
	err := c.Validate()
	require.Error(t, err)
	for _, v := range []string{"SVC_SYSLOG_ADDRESS", "SVC_SYSLOG_PROTOCOL", "SVC_SYSLOG_FORMAT", "SVC_SYSLOG_FACILITY",
		"SVC_SYSLOG_TLS_CA", "SVC_WEBHOOK_QUEUE_SIZE"} {
		assert.Contains(t, err.Error(), v)
	}
}

func TestParseFacility(t *testing.T) {
	tests := []struct {
		name string
		code int
	}{
		{"kern", 0}, {"user", 1}, {"mail", 2}, {"daemon", 3}, {"auth", 4}, {"syslog", 5}, {"lpr", 6},
		{"news", 7}, {"uucp", 8}, {"cron", 9}, {"authpriv", 10}, {"ftp", 11}, {"ntp", 12},
		{"security", 13}, {"audit", 13}, {"console", 14}, {"alert", 14}, {"clock", 15},
		{"local0", 16}, {"local1", 17}, {"local2", 18}, {"local3", 19}, {"local4", 20},
		{"local5", 21}, {"local6", 22}, {"local7", 23}, {"LOCAL0", 16}, {" Auth ", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, err := ParseFacility(tt.name)
			require.NoError(t, err)
			require.Equal(t, tt.code, code)
		})
	}
	for _, bad := range []string{"", "local8", "16", "kernel"} {
		_, err := ParseFacility(bad)
		require.Error(t, err, bad)
	}
}

func TestNewRejectsBadTLSCA(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tests := []struct {
		name, ca, want string
	}{
		{name: "missing file", ca: filepath.Join(dir, "nope.pem"), want: "SVC_SYSLOG_TLS_CA: open"},
		{name: "not PEM", ca: notPEM, want: "SVC_SYSLOG_TLS_CA: no PEM certificate in " + notPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Syslog: SyslogConfig{Enabled: true, Address: "127.0.0.1:6514", Protocol: ProtocolTLS, TLSCA: tt.ca}}, zerolog.Nop())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
