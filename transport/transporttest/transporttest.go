// Package transporttest makes real certificates for the tests of svc's
// TLS: a certificate authority and the certificates it issues for
// 127.0.0.1, written as PEM files.
package transporttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// CA is a certificate authority of a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is its certificate, PEM, for SVC_CA_FILE.
	File string
}

// NewCA makes an authority and writes its certificate to the test's
// temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	ca := &CA{cert: cert, key: key, File: filepath.Join(t.TempDir(), name+".pem")}
	require.NoError(t, os.WriteFile(ca.File, pemBlock("CERTIFICATE", der), 0o600))
	return ca
}

// Issue returns a server certificate for 127.0.0.1 and localhost with the
// serial number serial, and its key, both PEM.
func (ca *CA) Issue(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "svc test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	raw, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", raw)
}

// WritePair issues a certificate of serial number serial and writes it
// and its key to certFile and keyFile, replacing them. The files' times
// are set a second past the last write, so that a rewrite within the
// file system's time granularity is still seen as a change.
func (ca *CA) WritePair(t testing.TB, serial int64, certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, serial)
	stamp := time.Now()
	if fi, err := os.Stat(certFile); err == nil && !fi.ModTime().Before(stamp) {
		stamp = fi.ModTime().Add(time.Second)
	}
	for path, raw := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		require.NoError(t, os.Chtimes(path, stamp, stamp))
	}
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
