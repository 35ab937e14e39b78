package ledger

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
)

// jsonl is the append-only audit file. Only the group-commit leader touches
// it, so it needs no lock of its own.
type jsonl struct {
	path string
	log  zerolog.Logger
	f    *os.File // nil until opened, and again after a failure
	torn bool     // the file ends in a partial line (a crash mid-write)
}

// open opens the file if it is not open yet. Every append calls it, so an
// audit path that was unwritable starts working as soon as it is fixed.
func (j *jsonl) open() error {
	if j.f != nil {
		return nil
	}
	f, err := os.OpenFile(j.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log %s: %w", j.path, err)
	}
	// The file may have just been created: make its directory entry durable
	// too, or a power cut could lose the whole file.
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		_ = f.Close()
		return fmt.Errorf("open audit log %s: %w", j.path, err)
	}
	j.f, j.torn = f, endsTorn(j.path)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// endsTorn reports whether the file at path is non-empty and does not end
// in a newline. If it cannot tell, it reports false: appending to a torn line
// damages one line, while a needless newline would add an empty one.
func endsTorn(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return false
	}
	return last[0] != '\n'
}

// append writes buf, which holds whole lines, and syncs it to disk. It
// returns the size of the file before the write, for rollback. On failure
// the partial write is rolled back, so lines never merge.
func (j *jsonl) append(buf []byte) (int64, error) {
	if err := j.open(); err != nil {
		return 0, err
	}
	fi, err := j.f.Stat()
	if err != nil {
		_ = j.close() // the Stat error is the one to report
		return 0, fmt.Errorf("append audit log %s: %w", j.path, err)
	}
	size := fi.Size()
	if j.torn {
		buf = append([]byte{'\n'}, buf...)
	}
	_, err = j.f.Write(buf)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.rollback(size)
		return 0, fmt.Errorf("append audit log %s: %w", j.path, err)
	}
	j.torn = false
	return size, nil
}

// rollback truncates the file back to size, removing lines whose records
// were not acknowledged, and closes it: after a failed write or fsync the
// descriptor's state is unknown, and the next append reopens the file and
// re-checks its tail.
func (j *jsonl) rollback(size int64) {
	err := j.f.Truncate(size)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.log.Error().Err(err).Str("path", j.path).
			Msg("audit log: cannot remove lines of a failed batch; they are not acknowledged")
	}
	_ = j.close() // the write error is the one to report
}

// close closes the file if open; append has already synced its data.
func (j *jsonl) close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("close audit log %s: %w", j.path, err)
	}
	return nil
}
