package holds

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"time"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies every embedded migration not yet recorded in
// holds_migrations (a table of its own, so the ledger's migrations table
// in the same database never clashes), each in its own transaction.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS holds_migrations (
		name TEXT PRIMARY KEY, applied_ms INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create holds_migrations: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := migrateOne(ctx, db, name); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	return nil
}

func migrateOne(ctx context.Context, db *sql.DB, name string) error {
	body, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM holds_migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO holds_migrations (name, applied_ms) VALUES (?, ?)`,
		name, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}
