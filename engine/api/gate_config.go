package api

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/svc-dev/svc/engine"
)

// Defaults and bounds of the gate's introspection settings.
const (
	DefaultGateCacheSeconds = 30               // SVC_GATE_INTROSPECTION_CACHE_SECONDS
	DefaultGateTimeout      = 5 * time.Second  // SVC_GATE_INTROSPECTION_TIMEOUT
	DefaultGateCacheSize    = 10000            // credentials cached at once
	MaxGateCacheSeconds     = 86400            // the longest a verdict is cached
	MaxGateTimeout          = 60 * time.Second // the longest introspection timeout
	maxIntrospectionBody    = 64 << 10
)

// GateConfig configures the credential gate: token introspection of
// portal-issued agent credentials (SVC_GATE_INTROSPECTION_*).
type GateConfig struct {
	URL          string        // SVC_GATE_INTROSPECTION_URL
	Auth         string        // SVC_GATE_INTROSPECTION_AUTH; a secret, never log it
	CABundle     string        // SVC_GATE_INTROSPECTION_CA_BUNDLE, a PEM file path
	CacheSeconds int           // SVC_GATE_INTROSPECTION_CACHE_SECONDS
	Timeout      time.Duration // SVC_GATE_INTROSPECTION_TIMEOUT
	CacheSize    int           // most credentials cached at once
}

// Enabled reports whether introspection is configured.
func (c GateConfig) Enabled() bool { return c.URL != "" }

// Validate checks the settings of an enabled gate and names the variable at
// fault.
func (c GateConfig) Validate() error {
	if !c.Enabled() {
		return nil
	}
	_, err := c.parse()
	return err
}

type gateSettings struct {
	url  *url.URL
	auth string // Authorization header value toward the portal, "" for none
	pool *x509.CertPool
}

func (c GateConfig) parse() (gateSettings, error) {
	switch {
	case c.CacheSeconds < 0 || c.CacheSeconds > MaxGateCacheSeconds:
		return gateSettings{}, fmt.Errorf("SVC_GATE_INTROSPECTION_CACHE_SECONDS %d: must be 0 to %d",
			c.CacheSeconds, MaxGateCacheSeconds)
	case c.Timeout <= 0 || c.Timeout > MaxGateTimeout:
		return gateSettings{}, fmt.Errorf("SVC_GATE_INTROSPECTION_TIMEOUT %s: must be above 0 and at most %s",
			c.Timeout, MaxGateTimeout)
	case c.CacheSize < 0:
		return gateSettings{}, fmt.Errorf("gate cache size %d: must not be negative", c.CacheSize)
	}
	u, err := parseGateURL(c.URL)
	if err != nil {
		return gateSettings{}, err
	}
	auth, err := authHeader(c.Auth)
	if err != nil {
		return gateSettings{}, err
	}
	pool, err := engine.LoadCAPool(c.CABundle, "SVC_GATE_INTROSPECTION_CA_BUNDLE")
	if err != nil {
		return gateSettings{}, err
	}
	return gateSettings{url: u, auth: auth, pool: pool}, nil
}

func parseGateURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("SVC_GATE_INTROSPECTION_URL: %w", err)
	}
	switch {
	case u.Hostname() == "":
		return nil, errors.New("SVC_GATE_INTROSPECTION_URL: must be an absolute URL with a host")
	case u.User != nil:
		return nil, errors.New("SVC_GATE_INTROSPECTION_URL: must not carry credentials; use SVC_GATE_INTROSPECTION_AUTH")
	case u.Scheme == "https", u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return u, nil
	}
	return nil, fmt.Errorf("SVC_GATE_INTROSPECTION_URL: scheme %q on host %q: must be https unless the host is loopback (127.0.0.0/8, ::1, localhost)",
		u.Scheme, u.Hostname())
}

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
}

func authHeader(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	scheme, rest, _ := strings.Cut(v, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") && rest != "" && strings.IndexFunc(rest, notVisibleASCII) < 0:
		return "Bearer " + rest, nil
	case strings.EqualFold(scheme, "Basic"):
		user, _, ok := strings.Cut(rest, ":")
		if ok && user != "" && strings.IndexFunc(rest, unicode.IsControl) < 0 {
			return "Basic " + base64.StdEncoding.EncodeToString([]byte(rest)), nil
		}
	}
	return "", errors.New(`SVC_GATE_INTROSPECTION_AUTH: must be "Bearer <token>" or "Basic <user>:<password>" (user and password in clear, not base64)`)
}

func notVisibleASCII(r rune) bool { return r <= ' ' || r > '~' }
