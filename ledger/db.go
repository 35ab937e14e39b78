// Package ledger owns svc's SQLite database and the two records kept in it
// by the decision path: the per-session budget ledger (Budgets) and the
// audit log (Audit: a JSONL file plus a SQLite mirror), stored with the
// database's Durability. The holds store shares the database through DB.SQL
// and runs its own migrations.
package ledger

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver (OpenReadOnly)

	"github.com/svc-dev/svc/database"
)

// pragmas are applied to every connection through the DSN, followed by the
// synchronous setting of the database's Durability.
//
// _stmt_cache_size keeps each connection's compiled statements, so the
// queries that stores on this database issue as SQL text (the hold store's
// reads and its writes in a decision's transaction) are prepared once per
// connection, like the statements this package prepares itself.
//
// _cache_size bounds each connection's page cache (cacheKiB); with the pool
// bounded to maxConns, SQLite's caches hold maxConns × cacheKiB at most
// (docs/performance.md, "Memory under steady load").
const pragmas = "_journal_mode=WAL&_busy_timeout=" + busyTimeoutMS +
	"&_txlock=immediate&_foreign_keys=1&_stmt_cache_size=32&_cache_size=-" + cacheKiB

// cacheKiB is the page cache of one connection, in KiB (SQLite's default
// is 2000). The decision path reads the tail of its indexes and the
// charges of recent sessions, which a small cache holds.
const cacheKiB = "1024"

// maxConns bounds the connection pool, open and idle alike: every
// connection keeps its own page cache and compiled statements, and a pool
// that closes and re-opens connections as load varies fragments the C
// heap. Writes are serialised anyway (DB.writer); the rest are reads.
const maxConns = 6

// busyTimeoutMS is how long, in milliseconds, a connection waits for a lock
// that another process holds on the database.
const busyTimeoutMS = "5000"

// Durability is when a commit of the decision path counts as stored, and so
// when svc may answer the decision (SVC_DURABILITY).
type Durability string

const (
	// DurabilityFull answers once the records are flushed to disk: the
	// JSONL lines are fsynced and SQLite commits with synchronous=FULL (one
	// WAL fsync per transaction). An answered decision survives a power cut.
	// It is the default: with NORMAL, a consumed hold or a charge that
	// silently disappears after a power cut would re-open an approval or a
	// budget, i.e. fail open.
	DurabilityFull Durability = "full"
	// DurabilityOS answers once the records are written to the operating
	// system: the JSONL lines are written without fsync and SQLite commits
	// with synchronous=NORMAL. An answered decision survives a crash of svc
	// but not of the machine: a background flush (Audit) puts everything
	// on disk every FlushInterval, so a power cut or kernel crash loses at
	// most the last FlushInterval of answers, charges and hold writes.
	DurabilityOS Durability = "os"
)

// FlushInterval is how often, under DurabilityOS, the audit log and the
// database are flushed to disk.
const FlushInterval = 100 * time.Millisecond

// ParseDurability returns the Durability named s, in any case.
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(strings.ToLower(s)); d {
	case DurabilityFull, DurabilityOS:
		return d, nil
	}
	return "", fmt.Errorf("must be %s or %s, got %q", DurabilityFull, DurabilityOS, s)
}

// synchronous is the DSN setting of d.
func (d Durability) synchronous() string {
	if d == DurabilityOS {
		return "&_synchronous=NORMAL"
	}
	return "&_synchronous=FULL"
}

// migrationPrefix begins the name of every row of the migrations table,
// which records this package's migrations (the holds store keeps its own
// holds_migrations).
const migrationPrefix = "ledger/"

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// DB is svc's SQLite database.
type DB struct {
	// Now is the clock stamped on audit rows; tests may replace it before
	// the first use.
	Now func() time.Time

	db         *sql.DB
	path       string
	durability Durability
	temp       string      // private directory removed on Close; "" for a durable path
	pg         bool        // a PostgreSQL database (OpenPostgres), not a SQLite file
	file       os.FileInfo // the database file as opened, to detect its removal (checkFile)
	created    bool        // Open created the file (Created)

	// writer serialises this package's write transactions in Go: SQLite's
	// busy handler, which would otherwise queue them, polls with sleeps of
	// up to 100ms and multiplies commit latency under contention.
	writer chan struct{}

	// charges caches recent sessions' charges for Budgets.Totals; Audit
	// commits keep it current.
	charges *chargeCache

	mu     sync.Mutex
	stmts  []*sql.Stmt
	stops  []func() // background work on the database, stopped by Close first (stopOnClose)
	closed bool
}

// Open opens (creating if needed) the database at path, committing with
// durability d (DurabilityFull when empty), and applies pending migrations.
// Only Open creates the file: every connection opens it read-write without
// creating it, so a database removed or moved away while svc runs is never
// replaced by an empty one (see checkFile). An empty path means ephemeral: the database lives in a private
// temporary directory that Close removes, so "in-memory" state is simply not
// persisted across restarts. A real file is used rather than a shared-cache
// :memory: database, whose table locks break concurrent readers and writers.
func Open(ctx context.Context, path string, d Durability) (*DB, error) {
	if d == "" {
		d = DurabilityFull
	}
	if _, err := ParseDurability(string(d)); err != nil {
		return nil, fmt.Errorf("open ledger %s: durability %w", path, err)
	}
	db := &DB{Now: time.Now, path: path, durability: d, writer: make(chan struct{}, 1), charges: newChargeCache()}
	if path == "" {
		dir, err := os.MkdirTemp("", "svc-ledger-*") // mode 0700
		if err != nil {
			return nil, fmt.Errorf("open ephemeral ledger: %w", err)
		}
		db.temp, db.path = dir, filepath.Join(dir, "svc.db")
	}
	if err := db.open(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", db.path, err)
	}
	return db, nil
}

func (db *DB) open(ctx context.Context) error {
	if strings.ContainsRune(db.path, '?') {
		return errors.New("path must not contain '?'")
	}
	created, err := database.CreateFile(db.path)
	if err != nil {
		return err
	}
	db.created = created
	// No commit checkpoints (database.SQLite): the Audit does, in the
	// background; a process without one checkpoints when it closes the file.
	sqlDB, err := sql.Open(database.SQLite, dsn(db.path)+"?mode=rw&"+pragmas+db.durability.synchronous())
	if err != nil {
		return err
	}
	db.db = sqlDB
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	if err := sqlDB.PingContext(ctx); err != nil {
		return err
	}
	if err := db.migrate(ctx, db.db); err != nil {
		return err
	}
	// The migrations have written the file, so it exists now.
	db.file, err = os.Stat(db.path)
	return err
}

// dsn is the SQLite URI of the file at path: "file:" and the path, with
// the characters that a URI reads specially escaped.
func dsn(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "#", "%23").Replace(filepath.Clean(path))
}

// Created reports whether Open created the database file, rather than
// opening one that existed.
func (db *DB) Created() bool { return db.created }

// Exists reports whether a database file exists at path, so that a caller
// can tell, before Open, whether Open would create it.
func Exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("ledger %s: %w", path, err)
}

// migrator is where migrations run: the pool, or on PostgreSQL the
// connection that holds the migration lock (database.WithLock).
type migrator interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies, in name order, every embedded migration not yet recorded
// in the migrations table, each in its own transaction, on q.
func (db *DB) migrate(ctx context.Context, q migrator) error {
	const create = `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY)`
	if _, err := q.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	names, err := fs.Glob(migrationFS, db.migrationGlob())
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := migrateFile(ctx, q, name); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	return nil
}

func migrateFile(ctx context.Context, q migrator, name string) error {
	tx, err := q.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()

	key := migrationPrefix + filepath.Base(name)
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM migrations WHERE name = ?`, key).Scan(&n); err != nil {
		return err
	} else if n != 0 {
		return nil
	}
	body, err := fs.ReadFile(migrationFS, name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (name) VALUES (?)`, key); err != nil {
		return err
	}
	return tx.Commit()
}

// errFileGone is the error of a write to a database whose file was removed
// or replaced while svc ran.
var errFileGone = errors.New("database file removed or replaced while svc runs")

// checkFile reports errFileGone when the database's path no longer names
// the file opened, or its write-ahead log is missing. SQLite keeps writing
// to the descriptors it holds, so a deleted database would take every
// charge, hold and freeze flag written since with it at the next start.
// During a write transaction SQLite has the log open, and so created; only
// its removal can make it missing then.
func (db *DB) checkFile() error {
	if db.pg {
		return nil
	}
	fi, err := os.Stat(db.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("ledger %s: %w: the file is missing", db.path, errFileGone)
	case err != nil:
		return fmt.Errorf("ledger %s: %w", db.path, err)
	case !os.SameFile(fi, db.file):
		return fmt.Errorf("ledger %s: %w: the path names another file", db.path, errFileGone)
	}
	if _, err := os.Stat(db.path + "-wal"); err != nil {
		return fmt.Errorf("ledger %s: %w: its write-ahead log: %w", db.path, errFileGone, err)
	}
	return nil
}

// write runs fn in a write transaction and commits it if fn succeeds and
// the database file is still the one opened (checkFile): one stat of each
// file per transaction, taken after fn so that it covers the whole
// transaction but its commit.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.writeTx(ctx, db.db.BeginTx, fn)
}

// writeWithin is write, waiting for a lock that another process holds on
// the database only until ctx's deadline rather than for busyTimeoutMS:
// SQLite's busy wait ignores the context.
func (db *DB) writeWithin(ctx context.Context, fn func(tx *sql.Tx) error) error {
	deadline, ok := ctx.Deadline()
	if !ok || db.pg { // PostgreSQL's lock waits end with ctx
		return db.write(ctx, fn)
	}
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer db.release(conn)
	wait := max(time.Until(deadline).Milliseconds(), 1)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", wait)); err != nil {
		return err
	}
	return db.writeTx(ctx, conn.BeginTx, fn)
}

// Writable checks that the database takes writes now: it takes the write
// lock (BEGIN IMMEDIATE) and checks that the file is still the one opened,
// as every write does, within ctx's deadline, and commits nothing.
func (db *DB) Writable(ctx context.Context) error {
	return db.writeWithin(ctx, func(*sql.Tx) error { return nil })
}

// release restores conn's busy timeout and returns it to the pool, or
// discards it if the timeout cannot be restored. Either way the outcome of
// the write made on conn stands: a write that committed is not reported as
// failed because its connection was then discarded.
func (db *DB) release(conn *sql.Conn) {
	if _, err := conn.ExecContext(context.Background(), "PRAGMA busy_timeout = "+busyTimeoutMS); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		return
	}
	_ = conn.Close() // returns it to the pool
}

// exclusive runs fn while none of this package's write transactions is in
// progress (database.CheckpointConfig.Exclusive).
func (db *DB) exclusive(ctx context.Context, fn func()) error {
	if err := db.lockWriter(ctx); err != nil {
		return err
	}
	defer func() { <-db.writer }()
	fn()
	return nil
}

// lockWriter takes the writer lock (db.writer), or returns ctx's error.
func (db *DB) lockWriter(ctx context.Context) error {
	select {
	case db.writer <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeTx is write on a transaction begun by begin.
func (db *DB) writeTx(ctx context.Context, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error),
	fn func(tx *sql.Tx) error) error {
	if !db.pg { // PostgreSQL orders concurrent writers itself, across replicas too
		if err := db.lockWriter(ctx); err != nil {
			return err
		}
		defer func() { <-db.writer }()
	}
	tx, err := begin(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := db.checkFile(); err != nil {
		return err
	}
	return tx.Commit()
}

// syncWAL flushes the database's write-ahead log to disk, which makes every
// transaction committed so far durable. The file is opened by name each
// time, since SQLite may remove and re-create it; a missing log has nothing
// to flush.
func (db *DB) syncWAL() error {
	if db.pg {
		return nil
	}
	f, err := os.Open(db.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("flush ledger log %s-wal: %w", db.path, err)
	}
	defer func() { _ = f.Close() }()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("flush ledger log %s-wal: %w", db.path, err)
	}
	return nil
}

// SQL returns the shared connection pool, for stores that live in the same
// database (holds).
func (db *DB) SQL() *sql.DB { return db.db }

// Path returns the database file's path, the generated one when ephemeral.
func (db *DB) Path() string { return db.path }

// stopOnClose has Close call stop before it closes the database: work in
// the background (the Audit's checkpoints) ends with the database even when
// its owner is not closed first. stop must be safe to call again.
func (db *DB) stopOnClose(stop func()) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.stops = append(db.stops, stop)
}

// prepare prepares a statement that Close will release.
func (db *DB) prepare(ctx context.Context, query string) (*sql.Stmt, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errors.New("ledger closed")
	}
	stmt, err := db.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	db.stmts = append(db.stmts, stmt)
	return stmt, nil
}

// Close closes the database and, when ephemeral, removes its directory. It
// is idempotent. Close an Audit before its DB.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	for _, stop := range db.stops {
		stop()
	}
	var errs []error
	for _, stmt := range db.stmts {
		errs = append(errs, stmt.Close())
	}
	if db.db != nil {
		errs = append(errs, db.db.Close())
	}
	if db.temp != "" {
		errs = append(errs, os.RemoveAll(db.temp))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close ledger %s: %w", db.path, err)
	}
	return nil
}
