package export

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine"
)

// Syslog transports and body formats (SVC_SYSLOG_PROTOCOL, SVC_SYSLOG_FORMAT).
const (
	ProtocolUDP = "udp"
	ProtocolTCP = "tcp"
	ProtocolTLS = "tls"
	FormatJSON  = "json"
	FormatCEF   = "cef"
)

// Defaults and bounds of the export settings.
const (
	DefaultQueueSize      = 1000
	MaxQueueSize          = 100000
	DefaultFacility       = "local0"
	DefaultDrainTimeout   = 3 * time.Second
	DefaultWebhookTimeout = 5 * time.Second
	DefaultWebhookTries   = 3
	MaxWebhookTries       = 10
)

// Config is the whole export configuration. The zero value, after
// SetDefaults, exports nothing.
type Config struct {
	Syslog  SyslogConfig
	Webhook WebhookConfig
	// DrainTimeout bounds how long Close waits for the queues to drain.
	DrainTimeout time.Duration
}

// SyslogConfig holds the SVC_SYSLOG_* settings (spec §6.1).
type SyslogConfig struct {
	Enabled  bool   // SVC_SYSLOG_ENABLED
	Address  string // SVC_SYSLOG_ADDRESS, host:port of the collector
	Protocol string // SVC_SYSLOG_PROTOCOL: udp, tcp or tls
	Format   string // SVC_SYSLOG_FORMAT: json or cef
	Facility string // SVC_SYSLOG_FACILITY, a name such as local0 or auth
	// TLSCA is SVC_SYSLOG_TLS_CA: a PEM file of extra roots trusted for the
	// collector's certificate, on top of the system roots.
	TLSCA string
	// TLSInsecureSkipVerify is true only when SVC_SYSLOG_TLS_VERIFY=false:
	// the explicit opt-out from verifying the collector. Its zero value is
	// the safe one.
	TLSInsecureSkipVerify bool
	// QueueSize bounds the syslog queue (spec: 1000; not an environment
	// setting).
	QueueSize int
	// MaxMessage is SVC_SYSLOG_MAX_MESSAGE: the most octets one syslog
	// message may take, header included; longer events have their longest
	// text fields cut (DefaultMaxMessage when 0).
	MaxMessage int
}

// WebhookConfig holds the SVC_WEBHOOK_* settings (spec §6.6).
type WebhookConfig struct {
	URL       string // SVC_WEBHOOK_URL; empty disables webhooks
	QueueSize int    // SVC_WEBHOOK_QUEUE_SIZE
	// Secret is SVC_WEBHOOK_SECRET. When set, every POST carries
	//   X-Svc-Timestamp: <unix seconds, decimal>
	//   X-Svc-Signature: sha256=<lowercase hex of HMAC-SHA256(Secret, T + "." + body)>
	// where T is the exact X-Svc-Timestamp value and body the exact request
	// body bytes. Each attempt is signed afresh with its own timestamp.
	Secret string
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// MaxAttempts is how many times one event is tried (5xx, 429 and
	// connection errors are retried with backoff; other statuses are not).
	MaxAttempts int
	// RetryBackoff is the wait before the first retry; it doubles per retry.
	RetryBackoff time.Duration
}

// Enabled reports whether webhooks are configured.
func (c WebhookConfig) Enabled() bool { return c.URL != "" }

// SetDefaults fills every unset field with its default.
func (c *Config) SetDefaults() {
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	c.Syslog.SetDefaults()
	c.Webhook.SetDefaults()
}

// SetDefaults fills every unset syslog field with its default.
func (c *SyslogConfig) SetDefaults() {
	if c.Protocol == "" {
		c.Protocol = ProtocolUDP
	}
	if c.Format == "" {
		c.Format = FormatJSON
	}
	if c.Facility == "" {
		c.Facility = DefaultFacility
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
}

// SetDefaults fills every unset webhook field with its default.
func (c *WebhookConfig) SetDefaults() {
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultWebhookTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultWebhookTries
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 500 * time.Millisecond
	}
}

// Validate reports every invalid setting, each error naming its variable.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate, returning as well the roots that SVC_SYSLOG_TLS_CA
// names (see SyslogConfig.validate), so that New reads the file once.
func (c Config) validate() (*x509.CertPool, error) {
	roots, err := c.Syslog.validate()
	return roots, errors.Join(err, c.Webhook.Validate())
}

// Validate checks the syslog settings; the address is required only when
// syslog is enabled. SVC_SYSLOG_TLS_CA is loaded whenever it is set, even
// with syslog off or not over TLS, so that a bad file is found with the
// other settings rather than when the sender starts.
func (c SyslogConfig) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate, returning as well the system roots plus those of
// SVC_SYSLOG_TLS_CA when it is set and valid, nil otherwise: the roots the
// TLS sender trusts.
func (c SyslogConfig) validate() (*x509.CertPool, error) {
	var errs []error
	if c.Enabled && c.Address == "" {
		errs = append(errs, errors.New("SVC_SYSLOG_ADDRESS: required when SVC_SYSLOG_ENABLED is true"))
	} else if c.Address != "" {
		if err := checkHostPort(c.Address); err != nil {
			errs = append(errs, fmt.Errorf("SVC_SYSLOG_ADDRESS: %w", err))
		}
	}
	switch c.Protocol {
	case ProtocolUDP, ProtocolTCP, ProtocolTLS:
	default:
		errs = append(errs, fmt.Errorf("SVC_SYSLOG_PROTOCOL: must be udp, tcp or tls, got %q", c.Protocol))
	}
	switch c.Format {
	case FormatJSON, FormatCEF:
	default:
		errs = append(errs, fmt.Errorf("SVC_SYSLOG_FORMAT: must be json or cef, got %q", c.Format))
	}
	if _, err := ParseFacility(c.Facility); err != nil {
		errs = append(errs, fmt.Errorf("SVC_SYSLOG_FACILITY: %w", err))
	}
	var roots *x509.CertPool
	if c.TLSCA != "" {
		var err error
		if roots, err = engine.LoadCAPool(c.TLSCA, "SVC_SYSLOG_TLS_CA"); err != nil {
			errs = append(errs, err)
		}
	}
	if c.QueueSize < 1 || c.QueueSize > MaxQueueSize {
		errs = append(errs, fmt.Errorf("syslog queue size: must be between 1 and %d, got %d", MaxQueueSize, c.QueueSize))
	}
	if c.MaxMessage < MinMaxMessage || c.MaxMessage > MaxMaxMessage {
		errs = append(errs, fmt.Errorf("SVC_SYSLOG_MAX_MESSAGE: must be between %d and %d octets, got %d",
			MinMaxMessage, MaxMaxMessage, c.MaxMessage))
	}
	return roots, errors.Join(errs...)
}

// Validate checks the webhook settings. The URL itself is never echoed: it
// may carry a token.
func (c WebhookConfig) Validate() error {
	var errs []error
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		switch {
		case err != nil:
			errs = append(errs, errors.New("SVC_WEBHOOK_URL: not a valid URL"))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("SVC_WEBHOOK_URL: scheme must be http or https, got %q", u.Scheme))
		case u.Host == "":
			errs = append(errs, errors.New("SVC_WEBHOOK_URL: missing host"))
		}
	}
	if c.QueueSize < 1 || c.QueueSize > MaxQueueSize {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOK_QUEUE_SIZE: must be between 1 and %d, got %d", MaxQueueSize, c.QueueSize))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("webhook timeout: must be positive, got %s", c.Timeout))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxWebhookTries {
		errs = append(errs, fmt.Errorf("webhook attempts: must be between 1 and %d, got %d", MaxWebhookTries, c.MaxAttempts))
	}
	return errors.Join(errs...)
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port must be 1-65535, got %q", port)
	}
	return nil
}

// facilities maps syslog facility names (RFC 5424 §6.2.1 and their usual
// names) to codes.
var facilities = map[string]int{
	"kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5,
	"lpr": 6, "news": 7, "uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11,
	"ntp": 12, "security": 13, "audit": 13, "console": 14, "alert": 14,
	"clock": 15, "local0": 16, "local1": 17, "local2": 18, "local3": 19,
	"local4": 20, "local5": 21, "local6": 22, "local7": 23,
}

// ParseFacility returns the code of a syslog facility name (case-insensitive),
// e.g. local0 → 16, auth → 4.
func ParseFacility(name string) (int, error) {
	code, ok := facilities[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return 0, fmt.Errorf("unknown facility %q (want kern, user, mail, daemon, auth, syslog, lpr, news, uucp, cron, authpriv, ftp, ntp, security, console, clock or local0-local7)", name)
	}
	return code, nil
}
