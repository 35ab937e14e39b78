package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
)

// jsonl is the append-only audit file. Only the group-commit leader touches
// it, so it needs no lock of its own.
type jsonl struct {
	path  string
	log   zerolog.Logger
	sync  bool                 // fsync every append (DurabilityFull); else flush does
	fsync func(*os.File) error // (*os.File).Sync; tests inject faults
	f     *os.File             // nil until opened, and again after a failure
	torn  bool                 // the file ends in a partial line (a crash mid-write)
	dirty bool                 // holds acknowledged lines not fsynced yet
}

// newJSONL returns the audit file at path, fsynced on every append when
// sync is set.
func newJSONL(path string, sync bool, log zerolog.Logger) *jsonl {
	return &jsonl{path: path, log: log, sync: sync, fsync: (*os.File).Sync}
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

// append writes buf, which holds whole lines, and syncs it to disk unless
// the file is flushed in the background (DurabilityOS). It returns the size
// of the file before the write, for rollback. On failure the partial write
// is rolled back, so lines never merge.
func (j *jsonl) append(buf []byte) (int64, error) {
	if err := j.open(); err != nil {
		return 0, err
	}
	fi, err := j.f.Stat()
	if err != nil {
		j.drop()
		return 0, fmt.Errorf("append audit log %s: %w", j.path, err)
	}
	size := fi.Size()
	if j.torn {
		buf = append([]byte{'\n'}, buf...)
	}
	_, err = j.f.Write(buf)
	if err == nil && j.sync {
		err = j.fsync(j.f)
	}
	if err != nil {
		j.rollback(size)
		return 0, fmt.Errorf("append audit log %s: %w", j.path, err)
	}
	j.torn = false
	j.dirty = j.dirty || !j.sync
	return size, nil
}

// flush syncs to disk what was written since the last successful flush,
// reopening the file if a failed write closed it. After a failure the file
// is closed, as its state is unknown.
func (j *jsonl) flush() error {
	if !j.dirty {
		return nil
	}
	if err := j.open(); err != nil {
		return err
	}
	if err := j.fsync(j.f); err != nil {
		j.drop()
		return fmt.Errorf("flush audit log %s: %w", j.path, err)
	}
	j.dirty = false
	return nil
}

// rollback truncates the file back to size, removing lines whose records
// were not acknowledged, syncs it (which also flushes the lines before
// them) and closes it: after a failed write or fsync the descriptor's state
// is unknown, and the next append reopens the file and re-checks its tail.
func (j *jsonl) rollback(size int64) {
	err := j.f.Truncate(size)
	if err == nil {
		err = j.fsync(j.f)
	}
	if err != nil {
		j.log.Error().Err(err).Str("path", j.path).
			Msg("audit log: cannot remove lines of a failed batch; they are not acknowledged")
	} else {
		j.dirty = false
	}
	j.drop()
}

// close flushes the file and closes it if open.
func (j *jsonl) close() error {
	err := j.flush()
	if j.f == nil {
		return err
	}
	if cerr := j.f.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close audit log %s: %w", j.path, cerr))
	}
	j.f = nil
	return err
}

// drop closes the descriptor without flushing, after a failure.
func (j *jsonl) drop() {
	_ = j.f.Close() // the failure that led here is the one to report
	j.f = nil
}
