// Package transport secures svc's HTTP: TLS on its listeners with
// certificate files reloaded as they change, the certificate authorities
// its clients verify servers with, and the rule that plain HTTP stays on
// the loopback interface, where no token travels in clear over a network.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// MinVersion is the oldest TLS version svc's listeners and clients speak.
const MinVersion = tls.VersionTLS12

// Loopback reports whether host (a name or an IP address, without a port)
// names only the loopback interface.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ErrPlaintext is the error of a plain-HTTP URL to a host off the loopback
// interface.
var ErrPlaintext = errors.New("plain http to a host that is not loopback")

// CheckURL refuses a plain-HTTP URL to a host off the loopback interface,
// unless allowPlaintext: the requests carry bearer tokens.
func CheckURL(u *url.URL, allowPlaintext bool) error {
	if u.Scheme == "http" && !allowPlaintext && !Loopback(u.Hostname()) {
		return fmt.Errorf("%w: %s would carry tokens in clear; use https, or set SVC_ALLOW_PLAINTEXT=1 on a network you trust",
			ErrPlaintext, u.Host)
	}
	return nil
}

// RootCAs reads the PEM certificates of the file at path, the authorities
// a client trusts instead of the system's; an empty path means the
// system's (nil).
func RootCAs(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// ClientConfig is the TLS configuration of a client trusting roots (nil:
// the system's authorities).
func ClientConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{MinVersion: MinVersion, RootCAs: roots}
}

// Certificate serves the certificate and key of two PEM files, reading
// them again when either changes (its modification time or size), so that
// a renewed certificate is served from the next handshake on without a
// restart. A change that does not load (the key written but not the
// certificate yet) leaves the last good pair in service, and is tried
// again at the next handshake.
type Certificate struct {
	certFile, keyFile string
	onError           func(error) // told of a change that does not load

	mu       sync.Mutex
	cert     *tls.Certificate
	stamp    [2]fileStamp
	reported string // the error of the last reload that failed, reported once
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadCertificate loads the pair, which must load now; onError (may be
// nil) is told of later changes that do not.
func LoadCertificate(certFile, keyFile string, onError func(error)) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile, onError: onError}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// stamps returns the stamps of both files.
func (c *Certificate) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, p := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(p)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

// reload reads the pair if either file changed since the last load.
func (c *Certificate) reload() error {
	stamp, err := c.stamps()
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	if c.cert != nil && stamp == c.stamp {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s, key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.stamp = &pair, stamp
	return nil
}

// GetCertificate is the tls.Config hook: the current pair.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.reload()
	switch {
	case err == nil:
		c.reported = ""
	case err.Error() != c.reported && c.onError != nil:
		c.reported = err.Error()
		c.onError(fmt.Errorf("%w; the previous certificate stays in service", err))
	}
	return c.cert, nil
}

// ServerConfig is the TLS configuration of a listener serving c.
func ServerConfig(c *Certificate) *tls.Config {
	return &tls.Config{MinVersion: MinVersion, GetCertificate: c.GetCertificate}
}

// DropBody makes the answer to a request whose body the server will not
// read to its end close the connection: net/http would otherwise wait for
// the rest of the body, up to 256 KiB and without a deadline, to keep the
// connection, so that a client sending part of a declared body would hold
// a goroutine and a descriptor for as long as it likes. Call it before
// writing the answer.
func DropBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // unsupported only by test recorders
}
