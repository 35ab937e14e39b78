// Package database opens the SQL database svc keeps its state in: the
// embedded SQLite file (package ledger opens it) or, when SVC_DATABASE_URL
// names one, a PostgreSQL server shared by several replicas. It gives the
// stores one SQL text for both: statements are written with SQLite's "?"
// placeholders, which the PostgreSQL connections of this package rewrite to
// "$n", and the few constructs that differ are chosen by IsPostgres.
package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenPostgres opens a pool of connections to the PostgreSQL server named
// by url (postgres:// or postgresql://), with a statement timeout of
// timeout (none when 0) on every connection, and checks that it answers.
// The pool reconnects on its own: a server that went away and came back
// serves the next statement.
func OpenPostgres(ctx context.Context, url string, timeout time.Duration) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if timeout > 0 {
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
		cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	}
	inner := stdlib.GetConnector(*cfg)
	db := sql.OpenDB(connector{inner: inner})
	db.SetMaxIdleConns(maxIdle)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	return db, nil
}

// maxIdle is how many idle connections a pool keeps: enough for the
// decisions in flight, so that a busy engine does not reconnect.
const maxIdle = 32

// Redact returns url without its password, for messages and logs.
func Redact(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "(unparseable url)"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// IsPostgres reports whether db was opened by OpenPostgres.
func IsPostgres(db *sql.DB) bool {
	_, ok := db.Driver().(pgDriver)
	return ok
}

// connector opens pgx connections that rewrite placeholders.
type connector struct{ inner driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := conn.(*stdlib.Conn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("pgx connector returned %T", conn)
	}
	return &rebindConn{Conn: pc}, nil
}

func (c connector) Driver() driver.Driver { return pgDriver{c.inner.Driver()} }

// pgDriver marks a pool as PostgreSQL (IsPostgres).
type pgDriver struct{ driver.Driver }

// rebindConn is a pgx connection whose statements are written with "?"
// placeholders.
type rebindConn struct{ *stdlib.Conn }

func (c *rebindConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(Rebind(query))
}

func (c *rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, Rebind(query))
}

func (c *rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, Rebind(query), args)
}

func (c *rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, Rebind(query), args)
}

// Rebind rewrites the "?" placeholders of query to PostgreSQL's "$1",
// "$2", ...; a "?" inside a quoted literal or identifier is left alone.
func Rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	var quote rune
	for _, r := range query {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// LockKey is the PostgreSQL advisory lock key of name.
func LockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64()) //nolint:gosec // a key, wrapping is fine
}

// WithLock runs fn on one connection of db while holding the session-level
// advisory lock of name, which serialises fn across every replica: the
// migrations of replicas starting together run one after another.
//
// The wait for the lock is bounded by ctx only, not by the pool's
// statement and lock timeouts (the decision deadline), which are lifted on
// this connection; it is closed afterwards rather than returned to the
// pool, which also releases the lock.
func WithLock(ctx context.Context, db *sql.DB, name string, fn func(conn *sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		_ = conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, `SET statement_timeout = 0; SET lock_timeout = 0`); err != nil {
		return fmt.Errorf("advisory lock %s: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, LockKey(name)); err != nil {
		return fmt.Errorf("advisory lock %s: %w", name, err)
	}
	return fn(conn)
}
