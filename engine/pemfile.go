package engine

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxPEMFile bounds a CA bundle svc reads (SVC_GATE_INTROSPECTION_CA_BUNDLE,
// SVC_SYSLOG_TLS_CA): a bundle of a few hundred certificates.
const MaxPEMFile = 1 << 20

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
