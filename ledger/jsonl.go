package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/database"
)

// jsonl is the append-only audit file. Only the group-commit leader writes
// it; under DurabilityOS the background flush syncs it beside the leader
// (syncBeside), through the atomic members.
type jsonl struct {
	path     string
	log      zerolog.Logger
	sync     bool                        // fsync every append (DurabilityFull); else flush does
	fsync    func(*os.File) error        // (*os.File).Sync; tests inject faults
	truncate func(*os.File, int64) error // (*os.File).Truncate; tests inject faults
	f        *os.File                    // nil until opened, and again after a failure
	torn     bool                        // the file ends in a partial line (a crash mid-write)

	handle atomic.Pointer[os.File] // f, for syncBeside
	// written counts the appends made without a sync, synced the count
	// that the last sync covered: the file holds acknowledged lines not
	// fsynced yet while they differ.
	written, synced atomic.Uint64
	lost            atomic.Pointer[error] // a rotated file's failed sync, which every flush reports
}

// errLinesKept marks a failed append whose lines could not be removed: the
// file may hold some or all of them.
var errLinesKept = errors.New("the lines could not be removed from the file")

// newJSONL returns the audit file at path, fsynced on every append when
// sync is set.
func newJSONL(path string, sync bool, log zerolog.Logger) *jsonl {
	return &jsonl{path: path, log: log, sync: sync, fsync: (*os.File).Sync, truncate: (*os.File).Truncate}
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
	if err := database.SyncDir(filepath.Dir(j.path)); err != nil {
		_ = f.Close()
		return fmt.Errorf("open audit log %s: %w", j.path, err)
	}
	j.setFile(f)
	j.torn = endsTorn(j.path)
	return nil
}

// setFile makes f the open file (nil: none).
func (j *jsonl) setFile(f *os.File) {
	j.f = f
	j.handle.Store(f)
}

// markSynced records that a sync covered the first n unsynced appends.
func (j *jsonl) markSynced(n uint64) {
	for {
		cur := j.synced.Load()
		if n <= cur || j.synced.CompareAndSwap(cur, n) {
			return
		}
	}
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
// is rolled back, so lines never merge; if that fails too, the error wraps
// errLinesKept.
func (j *jsonl) append(buf []byte) (int64, error) {
	return j.write(buf, j.sync)
}

// write is append, syncing buf to disk when sync is set whatever the
// durability.
func (j *jsonl) write(buf []byte, sync bool) (int64, error) {
	fi, err := j.current()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if j.torn {
		buf = append([]byte{'\n'}, buf...)
	}
	written := j.written.Load()
	_, err = j.f.Write(buf)
	if err == nil && sync {
		err = j.fsync(j.f)
	}
	if err != nil {
		if rerr := j.rollback(size); rerr != nil {
			err = errors.Join(err, errLinesKept)
		}
		return 0, fmt.Errorf("append audit log %s: %w", j.path, err)
	}
	j.torn = false
	if sync {
		j.markSynced(written) // the sync covered the earlier lines too
	} else {
		j.written.Add(1)
	}
	return size, nil
}

// current returns the state of the file that the path names now, which is
// where a batch must be appended. If the open file is no longer at the path
// (it was removed, or renamed away by a log rotation), lines written to it
// would be lost or land in the rotated file: it is synced if need be,
// closed, and the file at the path opened (created if missing). One stat of
// the path per batch.
func (j *jsonl) current() (os.FileInfo, error) {
	fi, err := j.opened()
	if err != nil {
		return nil, err
	}
	if at, err := os.Stat(j.path); err == nil && os.SameFile(fi, at) {
		return fi, nil
	}
	j.log.Warn().Str("path", j.path).Msg("audit log: the file was removed or renamed (rotated); reopening it at its path")
	if err := j.release(); err != nil {
		return nil, err
	}
	return j.opened()
}

// opened returns the state of the open file, opening the path first if no
// file is open; unlike current, it does not check that the path still
// names that file. A failed stat drops the file.
func (j *jsonl) opened() (os.FileInfo, error) {
	if err := j.open(); err != nil {
		return nil, err
	}
	fi, err := j.f.Stat()
	if err != nil {
		j.drop()
		return nil, fmt.Errorf("append audit log %s: %w", j.path, err)
	}
	return fi, nil
}

// release closes a file that is no longer at the path, first syncing to disk
// the lines written to it without a sync (DurabilityOS): they stay in the
// rotated file. A failed sync is kept for flush to report, so that it
// fails the audit log as any failed flush does.
func (j *jsonl) release() error {
	if written := j.written.Load(); written != j.synced.Load() {
		if err := j.fsync(j.f); err != nil {
			j.drop()
			lost := fmt.Errorf("flush rotated audit log %s: %w", j.path, err)
			j.lost.Store(&lost)
			return lost
		}
		j.markSynced(written)
	}
	err := j.f.Close()
	j.setFile(nil)
	if err != nil {
		return fmt.Errorf("close rotated audit log %s: %w", j.path, err)
	}
	return nil
}

// reopen closes the open file, syncing what it holds unsynced, and opens
// the one at the path, creating it if missing.
func (j *jsonl) reopen() error {
	if j.f != nil {
		if err := j.release(); err != nil {
			return err
		}
	}
	_, err := j.opened()
	return err
}

// flush syncs to disk what was written since the last successful flush,
// reopening the file if a failed write closed it. After a failure the file
// is closed, as its state is unknown. Once a rotated file could not be
// synced (release), flush fails for good.
func (j *jsonl) flush() error {
	if lost := j.lost.Load(); lost != nil {
		return *lost
	}
	written := j.written.Load()
	if written == j.synced.Load() {
		return nil
	}
	if err := j.open(); err != nil {
		return err
	}
	if err := j.fsync(j.f); err != nil {
		j.drop()
		return fmt.Errorf("flush audit log %s: %w", j.path, err)
	}
	j.markSynced(written)
	return nil
}

// syncBeside is flush for the background flush of DurabilityOS, which runs
// beside the leader: it syncs the file open now with fsync, and never opens,
// closes or drops one. A file the leader closed meanwhile was synced first
// (release) or failed its own batch (drop); its lines are synced by a later
// call through the file open then, or by Close.
func (j *jsonl) syncBeside(fsync func(*os.File) error) error {
	if lost := j.lost.Load(); lost != nil {
		return *lost
	}
	written := j.written.Load()
	f := j.handle.Load()
	if written == j.synced.Load() || f == nil {
		return nil
	}
	if err := fsync(f); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil
		}
		return fmt.Errorf("flush audit log %s: %w", j.path, err)
	}
	j.markSynced(written)
	return nil
}

// rollback truncates the file back to size, removing lines whose records
// were not acknowledged, syncs it (which also flushes the lines before
// them) and closes it: after a failed write or fsync the descriptor's state
// is unknown, and the next append reopens the file and re-checks its tail.
// When the lines cannot be removed (an append-only file refuses truncation)
// it logs and returns the error: the caller voids them (Audit.void).
func (j *jsonl) rollback(size int64) error {
	err := j.truncate(j.f, size)
	if err == nil {
		err = j.fsync(j.f)
	}
	j.drop()
	if err != nil {
		j.log.Error().Err(err).Str("path", j.path).
			Msg("audit log: cannot remove lines of a failed batch; they are not acknowledged")
		return fmt.Errorf("roll back audit log %s: %w", j.path, err)
	}
	j.markSynced(j.written.Load())
	return nil
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
	j.setFile(nil)
	return err
}

// drop closes the descriptor without flushing, after a failure.
func (j *jsonl) drop() {
	_ = j.f.Close() // the failure that led here is the one to report
	j.setFile(nil)
}
