package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
)

// Migrations returns the migrations this build applies: one .sql file
// each, applied in name order.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFS, "migrations") // a valid directory of the embedded files
	return sub
}

// AppliedMigrations returns the base names of the ledger migrations
// recorded in db, in order: none for a database svc never opened.
func AppliedMigrations(ctx context.Context, db *sql.DB) ([]string, error) {
	names, err := tableStrings(ctx, db, "migrations", "name")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if base, ok := strings.CutPrefix(n, migrationPrefix); ok {
			out = append(out, base)
		}
	}
	return out, nil
}

// tableStrings returns the values of column of table in db, sorted: none
// when the table does not exist.
func tableStrings(ctx context.Context, db *sql.DB, table, column string) ([]string, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).
		Scan(&n); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT %s FROM %s ORDER BY 1`, column, table)) //nolint:gosec // names are constants of the callers
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// OpenReadOnly opens the existing database at path read-only, for
// inspection and backup while an engine may be writing it: it never
// creates the file and takes no writer lock (LockWriter).
func OpenReadOnly(ctx context.Context, path string) (*sql.DB, error) {
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open %s: path must not contain '?'", path)
	}
	db, err := sql.Open("sqlite3", dsn(path)+"?mode=ro&_busy_timeout="+busyTimeoutMS)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}
