package cmd

import (
	"crypto/x509"
	stdlog "log"
	"maps"
	"net/http"
	"net/url"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/transport"
)

// tlsDefaults are the TLS settings, read by `svc serve` and
// `svc connector` for their listener and by every client of svc (svc holds,
// svc decide, the connector's calls to the engine, the engine's to an
// external OPA).
var tlsDefaults = map[string]any{"tls_cert_file": "", "tls_key_file": "", "ca_file": "", "allow_plaintext": "false"}

func init() {
	for _, set := range []map[string]any{serveDefaults, connectorDefaults, clientDefaults} {
		maps.Copy(set, tlsDefaults)
	}
}

// TLSConfig is the TLS of a listener and of the clients of a process.
type TLSConfig struct {
	CertFile, KeyFile string // the listener's certificate and key, PEM; both empty: plain HTTP
	CAFile            string // authorities the clients trust; empty: the system's
	AllowPlaintext    bool   // plain HTTP allowed off the loopback interface
	roots             *x509.CertPool
}

// Enabled reports whether the listener serves TLS.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" }

// tlsSettings reads the TLS settings of a process listening on host (the
// setting hostKey): a certificate needs its key and both must load, and a
// listener off the loopback interface needs them unless
// SVC_ALLOW_PLAINTEXT.
func (p *parser) tlsSettings(hostKey, host string) TLSConfig {
	c := p.clientTLS()
	c.CertFile, c.KeyFile = p.str("tls_cert_file"), p.str("tls_key_file")
	switch {
	case c.CertFile == "" && c.KeyFile != "":
		p.fail("tls_cert_file", "must be set with SVC_TLS_KEY_FILE: the PEM certificate (chain) of the listener")
	case c.CertFile != "" && c.KeyFile == "":
		p.fail("tls_key_file", "must be set with SVC_TLS_CERT_FILE: the PEM private key of the listener")
	case c.Enabled():
		if _, err := transport.LoadCertificate(c.CertFile, c.KeyFile, nil); err != nil {
			p.fail("tls_cert_file", "%v", err)
		}
	case !c.AllowPlaintext && !transport.Loopback(host):
		p.fail(hostKey, "is %q, not a loopback address, and no TLS is configured: set SVC_TLS_CERT_FILE and SVC_TLS_KEY_FILE, "+
			"or SVC_ALLOW_PLAINTEXT=1 to serve plain HTTP on a network you trust", host)
	}
	return c
}

// clientTLS reads the settings of svc's clients: SVC_CA_FILE and
// SVC_ALLOW_PLAINTEXT.
func (p *parser) clientTLS() TLSConfig {
	c := TLSConfig{CAFile: p.str("ca_file"), AllowPlaintext: p.boolean("allow_plaintext")}
	var err error
	if c.roots, err = transport.RootCAs(c.CAFile); err != nil {
		p.fail("ca_file", "%v", err)
	}
	return c
}

// serverURL refuses a plain-HTTP URL of the setting key to a host off the
// loopback interface, unless SVC_ALLOW_PLAINTEXT.
func (p *parser) serverURL(key string, u *url.URL, c TLSConfig) {
	if u == nil {
		return
	}
	if err := transport.CheckURL(u, c.AllowPlaintext); err != nil {
		p.fail(key, "%v", err)
	}
}

// listenTLS makes srv serve TLS with the certificate files of c, read
// again when they change; a change that does not load is logged.
func listenTLS(srv *http.Server, c TLSConfig, log zerolog.Logger) error {
	if !c.Enabled() {
		return nil
	}
	cert, err := transport.LoadCertificate(c.CertFile, c.KeyFile, func(err error) {
		log.Error().Err(err).Msg("TLS certificate not reloaded")
	})
	if err != nil {
		return &exitError{code: exitConfig, err: err}
	}
	srv.TLSConfig = transport.ServerConfig(cert)
	// A failed handshake (a client that does not trust the certificate, a
	// TLS 1.1 client) is logged by net/http: as a JSON line, like the rest.
	srv.ErrorLog = stdlog.New(log.With().Str("component", "http").Logger(), "", 0)
	log.Info().Str("cert_file", c.CertFile).Msg("the listener serves TLS; the certificate files are read again when they change")
	return nil
}
