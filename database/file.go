package database

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// CreateFile creates an empty file at path (SQLite reads an empty file as
// an empty database), readable by its owner only (0600: SQLite would
// create it 0644, and its write-ahead log and shared-memory files take the
// mode of the database file), unless one exists, and reports whether it
// did. An existing file keeps the mode it has.
func CreateFile(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := f.Close(); err != nil {
		return true, err
	}
	return true, SyncDir(filepath.Dir(path))
}

// SyncDir syncs the directory dir, so that a file created or renamed in it
// survives a power cut (it syncs a file too, opened the same way).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
