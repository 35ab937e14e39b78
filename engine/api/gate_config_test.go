package api

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/svc-dev/svc/engine"
)

func TestGatePlainHTTPLoopback(t *testing.T) {
	p := newPortal(t, nil, activeGateA)
	_, port, err := net.SplitHostPort(p.srv.Listener.Addr().String())
	require.NoError(t, err)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			g, _ := newGate(t, GateConfig{URL: "http://" + net.JoinHostPort(host, port), CacheSeconds: 30, Timeout: 2 * time.Second})
			gate, err := g.Authenticate(context.Background(), testCredential, "gate-a")
			require.NoError(t, err)
			assert.Equal(t, "gate-a", gate)
		})
	}
}

func TestGateLoopbackOnlyDial(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:80": true, "127.3.2.1:80": true, "[::1]:443": true,
		"10.1.2.3:80": false, "192.168.0.1:443": false, "[2001:db8::1]:80": false, "no-port": false,
	} {
		err := loopbackOnly("tcp", addr, nil)
		assert.Equal(t, ok, err == nil, addr)
	}
}

func TestGateValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	ca := newTestCA(t)
	caPEM, err := os.ReadFile(ca.path)
	require.NoError(t, err)
	notPEM := write("not.pem", "just text\n")
	keyPEM := write("key.pem", string(caPEM)+"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
	badCert := write("bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	commented := write("bundle.pem", "# operator bundle\n"+string(caPEM))
	fifo := filepath.Join(dir, "fifo.pem")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	huge := write("huge.pem", string(caPEM)+strings.Repeat("#", engine.MaxPEMFile))

	tests := []struct {
		name string
		edit func(*GateConfig)
		want string // "" = valid; else the variable named in the error
	}{
		{name: "https", edit: func(c *GateConfig) {}},
		{name: "disabled ignores the rest", edit: func(c *GateConfig) { c.URL, c.Timeout = "", -1 }},
		{name: "http 127.0.0.1", edit: func(c *GateConfig) { c.URL = "http://127.0.0.1:8080/introspect" }},
		{name: "http 127/8", edit: func(c *GateConfig) { c.URL = "http://127.9.9.9/" }},
		{name: "http ::1", edit: func(c *GateConfig) { c.URL = "http://[::1]:9000/" }},
		{name: "http localhost", edit: func(c *GateConfig) { c.URL = "http://LocalHost:9000/" }},
		{name: "http private address", edit: func(c *GateConfig) { c.URL = "http://10.0.0.1/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "http name", edit: func(c *GateConfig) { c.URL = "http://portal.example.com/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "http localhost lookalike", edit: func(c *GateConfig) { c.URL = "http://localhost.example.com/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "other scheme", edit: func(c *GateConfig) { c.URL = "ftp://127.0.0.1/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "relative", edit: func(c *GateConfig) { c.URL = "/introspect" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "unparseable", edit: func(c *GateConfig) { c.URL = "https://[::1" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "credentials in URL", edit: func(c *GateConfig) { c.URL = "https://u:p@portal.example.com/" }, want: "SVC_GATE_INTROSPECTION_URL"},
		{name: "cache 0", edit: func(c *GateConfig) { c.CacheSeconds = 0 }},
		{name: "negative cache", edit: func(c *GateConfig) { c.CacheSeconds = -1 }, want: "SVC_GATE_INTROSPECTION_CACHE_SECONDS"},
		{name: "cache above a day", edit: func(c *GateConfig) { c.CacheSeconds = 86401 }, want: "SVC_GATE_INTROSPECTION_CACHE_SECONDS"},
		{name: "zero timeout", edit: func(c *GateConfig) { c.Timeout = 0 }, want: "SVC_GATE_INTROSPECTION_TIMEOUT"},
		{name: "negative timeout", edit: func(c *GateConfig) { c.Timeout = -time.Second }, want: "SVC_GATE_INTROSPECTION_TIMEOUT"},
		{name: "timeout above 60 s", edit: func(c *GateConfig) { c.Timeout = 61 * time.Second }, want: "SVC_GATE_INTROSPECTION_TIMEOUT"},
		{name: "negative cache size", edit: func(c *GateConfig) { c.CacheSize = -1 }, want: "cache size"},
		{name: "bearer", edit: func(c *GateConfig) { c.Auth = "Bearer s3cr3t-Tok" }},
		{name: "basic", edit: func(c *GateConfig) { c.Auth = "Basic engine:s3cr3t-Tok" }},
		{name: "unknown scheme", edit: func(c *GateConfig) { c.Auth = "Token s3cr3t-Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bare token", edit: func(c *GateConfig) { c.Auth = "s3cr3t-Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "empty bearer", edit: func(c *GateConfig) { c.Auth = "Bearer " }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bearer with space", edit: func(c *GateConfig) { c.Auth = "Bearer s3cr3t Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bearer with newline", edit: func(c *GateConfig) { c.Auth = "Bearer s3cr3t-Tok\nX: y" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "pre-encoded basic", edit: func(c *GateConfig) { c.Auth = "Basic czNjcjN0LVRvaw==" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "basic without user", edit: func(c *GateConfig) { c.Auth = "Basic :s3cr3t-Tok" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "basic with CR", edit: func(c *GateConfig) { c.Auth = "Basic engine:s3cr3t-Tok\r" }, want: "SVC_GATE_INTROSPECTION_AUTH"},
		{name: "bundle with comment lines", edit: func(c *GateConfig) { c.CABundle = commented }},
		{name: "missing bundle", edit: func(c *GateConfig) { c.CABundle = filepath.Join(dir, "absent.pem") }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle not PEM", edit: func(c *GateConfig) { c.CABundle = notPEM }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle with a key", edit: func(c *GateConfig) { c.CABundle = keyPEM }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle with a bad certificate", edit: func(c *GateConfig) { c.CABundle = badCert }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle a FIFO (no hang)", edit: func(c *GateConfig) { c.CABundle = fifo }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle a device (no unbounded read)", edit: func(c *GateConfig) { c.CABundle = "/dev/zero" }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
		{name: "bundle over 1 MiB", edit: func(c *GateConfig) { c.CABundle = huge }, want: "SVC_GATE_INTROSPECTION_CA_BUNDLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := gateConfig("https://portal.example.com/oauth/introspect", ca)
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
			_, err = NewIntrospector(cfg)
			require.Error(t, err, "the constructor validates too")
		})
	}
}

func TestGateDisabledHasNoIntrospector(t *testing.T) {
	cfg := GateConfig{Timeout: DefaultGateTimeout, CacheSeconds: DefaultGateCacheSeconds}
	assert.False(t, cfg.Enabled())
	_, err := NewIntrospector(cfg)
	require.ErrorContains(t, err, "SVC_GATE_INTROSPECTION_URL")
}
