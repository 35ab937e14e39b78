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

// ReadPEMFile reads the CA bundle at path: a regular file of at most
// MaxPEMFile bytes. It is opened without blocking and checked on the open
// descriptor, so that a FIFO cannot hang start-up, nor a device such as
// /dev/zero exhaust memory.
func ReadPEMFile(path string) ([]byte, error) {
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
	case st.Size() > MaxPEMFile:
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxPEMFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxPEMFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxPEMFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxPEMFile)
	}
	return data, nil
}
