package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/svc-dev/svc/database"
)

// Backup writes a consistent copy of the database at path to the new file
// to while other processes may write the database: VACUUM INTO reads one
// snapshot of the database under a read transaction, taking no writer
// lock, so the engine keeps deciding. The copy is written beside to under a
// temporary name, checked (quick_check), synced and then linked to to, so
// that to is never a partial copy and an existing file is never replaced.
func Backup(ctx context.Context, path, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("backup to %s: %w", to, fs.ErrExist)
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup to %s: %w", to, err)
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }()
	// VACUUM INTO wants a missing or empty file; the empty one keeps its
	// 0600 mode.
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup to %s: %w", to, err)
	}
	if err := vacuumInto(ctx, path, name); err != nil {
		return err
	}
	if err := database.SyncDir(name); err != nil { // opens and syncs a file as it does a directory
		return fmt.Errorf("backup to %s: %w", to, err)
	}
	if err := os.Link(name, to); err != nil {
		return fmt.Errorf("backup to %s: %w", to, err)
	}
	return database.SyncDir(filepath.Dir(to))
}

// vacuumInto copies the database at path into the empty file to and
// checks the copy.
func vacuumInto(ctx context.Context, path, to string) error {
	src, err := OpenReadOnly(ctx, path)
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	defer src.Close()
	if _, err := src.ExecContext(ctx, `VACUUM INTO ?`, to); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	dst, err := OpenReadOnly(ctx, to)
	if err != nil {
		return fmt.Errorf("check backup: %w", err)
	}
	defer dst.Close()
	var result string
	if err := dst.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&result); err != nil {
		return fmt.Errorf("check backup: %w", err)
	}
	if result != "ok" {
		return fmt.Errorf("check backup: %w: %s", errors.New("quick_check failed"), result)
	}
	return nil
}
