package holds

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
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

// Migrations returns the migrations this build applies: one .sql file
// each, applied in name order.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations") // a valid directory of the embedded files
	return sub
}

// AppliedMigrations returns the base names of the migrations recorded in
// db's holds_migrations, in order: none for a database svc never opened.
func AppliedMigrations(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM holds_migrations ORDER BY name`)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read holds_migrations: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read holds_migrations: %w", err)
		}
		out = append(out, strings.TrimPrefix(name, "migrations/"))
	}
	return out, rows.Err()
}
