package ledger

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrLocked is the error of LockWriter when another process holds the lock.
var ErrLocked = errors.New("database in use by another process")

// LockPath is the lock file LockWriter takes for the database at path: a
// file beside it holding the pid of the process that writes it.
func LockPath(path string) string { return path + ".lock" }

// WriterLock is the lock of the one process that writes a database: two
// engines (or two connectors) on one database would each count budgets
// alone, so that a session overruns its limits.
type WriterLock struct {
	f *os.File
}

// LockWriter takes the writer lock of the database at path (LockPath), an
// advisory lock that the kernel releases when the process ends, however it
// ends. If another process holds it, the error wraps ErrLocked and names
// the path and that process's pid. Readers (svc backup, svc connector
// ledger) never take it.
func LockWriter(path string) (*WriterLock, error) {
	lp := LockPath(path)
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writer lock %s: %w", lp, err)
	}
	held, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writer lock %s: %w", lp, err)
	}
	if held {
		pid := holder(f)
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s is locked by process %s (lock file %s): one process writes a database; "+
			"stop that process or give this one another path", ErrLocked, path, pid, lp)
	}
	if err := writePID(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writer lock %s: %w", lp, err)
	}
	return &WriterLock{f: f}, nil
}

// holder reads the pid a lock file holds, or "unknown".
func holder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0) // a short or failed read leaves the pid unknown
	pid := strings.TrimSpace(string(buf[:n]))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

// writePID replaces the lock file's content with this process's pid.
func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// Close releases the lock. The file stays: removing it would let a third
// process lock a new file while a second still waits on the old one.
func (l *WriterLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the lock
	l.f = nil
	return err
}
