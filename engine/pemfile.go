package engine

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxPEMFile bounds a CA bundle svc reads (SVC_GATE_INTROSPECTION_CA_BUNDLE,
// SVC_SYSLOG_TLS_CA): a bundle of a few hundred certificates.
const MaxPEMFile = 1 << 20

// LoadCAPool returns the system roots plus the certificates of the PEM
// file at path, read with ReadPEMFile; the system roots alone when path is
// "". It loads every CA bundle svc is given (SVC_GATE_INTROSPECTION_CA_BUNDLE,
// SVC_SYSLOG_TLS_CA), and what, the setting's name, begins each of its
// errors. The file must hold at least one certificate, and every PEM block
// in it must be a CERTIFICATE that parses: a stray key or a corrupt
// certificate is refused, not skipped. Text around the blocks is ignored.
func LoadCAPool(path, what string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if path == "" {
		return pool, nil
	}
	data, err := ReadPEMFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	n := 0
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: PEM block %q in %s is not a CERTIFICATE", what, block.Type, path)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d in %s: %w", what, n+1, path, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in %s", what, path)
	}
	return pool, nil
}

// ReadPEMFile reads the CA bundle at path with ReadSettingsFile.
func ReadPEMFile(path string) ([]byte, error) { return ReadSettingsFile(path, MaxPEMFile) }

// ReadSettingsFile reads a file an operator names in a setting (a CA
// bundle, the resolver tokens): a regular file of at most limit bytes. It
// is opened without blocking and checked on the open descriptor, so that a
// FIFO cannot hang svc, nor a device such as /dev/zero exhaust its memory.
func ReadSettingsFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // names the path and the cause
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case st.Size() > limit:
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}
