package transport_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/transport"
	"github.com/svc-dev/svc/transport/transporttest"
)

// tlsServer accepts TLS connections with cfg on loopback, completing each
// handshake, until the test ends; it returns the address.
func tlsServer(t *testing.T, cfg *tls.Config) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake() // a refused client fails its own side
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

// serial handshakes with the server at addr trusting roots and returns the
// serial number of the certificate it served.
func serial(addr string, cfg *tls.Config) (int64, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func pool(t *testing.T, ca *transporttest.CA) *x509.CertPool {
	roots, err := transport.RootCAs(ca.File)
	require.NoError(t, err)
	return roots
}

func TestCertificateReloadedOnChange(t *testing.T) {
	ca := transporttest.NewCA(t, "ca")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.WritePair(t, 1, certFile, keyFile)
	var reported []error
	cert, err := transport.LoadCertificate(certFile, keyFile, func(err error) { reported = append(reported, err) })
	require.NoError(t, err)
	addr := tlsServer(t, transport.ServerConfig(cert))
	client := transport.ClientConfig(pool(t, ca))

	n, err := serial(addr, client)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	ca.WritePair(t, 2, certFile, keyFile)
	n, err = serial(addr, client)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "the rotated certificate serves the next handshake")

	// A half-written change (a key that is not the certificate's) keeps
	// the last good pair in service and is reported once.
	other, otherKey := filepath.Join(dir, "other.pem"), filepath.Join(dir, "otherkey.pem")
	ca.WritePair(t, 3, other, otherKey)
	raw, err := os.ReadFile(otherKey)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, raw, 0o600))
	for range 2 {
		n, err = serial(addr, client)
		require.NoError(t, err)
		assert.EqualValues(t, 2, n)
	}
	require.Len(t, reported, 1)
	assert.Contains(t, reported[0].Error(), "the previous certificate stays in service")
}

func TestServerRefusesOldTLSAndClientsRefuseAnotherCA(t *testing.T) {
	ca := transporttest.NewCA(t, "ca")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.WritePair(t, 1, certFile, keyFile)
	cert, err := transport.LoadCertificate(certFile, keyFile, nil)
	require.NoError(t, err)
	addr := tlsServer(t, transport.ServerConfig(cert))

	old := &tls.Config{RootCAs: pool(t, ca), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11} //nolint:gosec // the old client under test
	_, err = serial(addr, old)
	require.Error(t, err, "TLS 1.1 is refused")
	assert.Contains(t, err.Error(), "protocol version")

	_, err = serial(addr, transport.ClientConfig(pool(t, transporttest.NewCA(t, "other"))))
	var unknown x509.UnknownAuthorityError
	assert.True(t, errors.As(err, &unknown), "a certificate of another authority is refused: %v", err)

	_, err = serial(addr, transport.ClientConfig(pool(t, ca)))
	assert.NoError(t, err)
}

func TestLoadCertificateRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	_, err := transport.LoadCertificate(bad, bad, nil)
	assert.ErrorContains(t, err, bad)
	_, err = transport.LoadCertificate(filepath.Join(dir, "missing.pem"), bad, nil)
	assert.ErrorContains(t, err, "missing.pem")
	_, err = transport.RootCAs(bad)
	assert.ErrorContains(t, err, "holds no PEM certificate")
	roots, err := transport.RootCAs("")
	assert.NoError(t, err)
	assert.Nil(t, roots, "no file: the system's authorities")
}

func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		url   string
		allow bool
		ok    bool
	}{
		{"http://127.0.0.1:8080", false, true},
		{"http://127.9.0.1:8080", false, true},
		{"http://localhost:8080", false, true},
		{"http://LOCALHOST:8080", false, true},
		{"http://[::1]:8080", false, true},
		{"https://engine.example:8443", false, true},
		{"http://engine.example:8080", false, false},
		{"http://10.0.0.5:8080", false, false},
		{"http://[::ffff:10.0.0.5]:8080", false, false},
		{"http://localhost.example.com", false, false},
		{"http://engine.example:8080", true, true},
	} {
		u, err := url.Parse(tc.url)
		require.NoError(t, err)
		err = transport.CheckURL(u, tc.allow)
		if tc.ok {
			assert.NoError(t, err, tc.url)
		} else {
			assert.ErrorIs(t, err, transport.ErrPlaintext, tc.url)
			assert.ErrorContains(t, err, "SVC_ALLOW_PLAINTEXT", tc.url)
		}
	}
	assert.True(t, transport.Loopback("::1"))
	assert.False(t, transport.Loopback("0.0.0.0"))
	assert.False(t, transport.Loopback(net.IPv4(192, 168, 1, 1).String()))
}
