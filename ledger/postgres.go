package ledger

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/svc-dev/svc/database"
)

// OpenPostgres opens svc's database on the PostgreSQL server at url
// (SVC_DATABASE_URL), where several replicas share it, and applies pending
// migrations, one replica at a time. Every statement is bounded by timeout
// (the decision deadline; none when 0). Durability d sets nothing on the
// server: a commit PostgreSQL acknowledges is durable as the server is
// configured (synchronous_commit), for every d.
//
// The file checks and the write-ahead log flushes of SQLite do not apply;
// the totals cache is bypassed (Budgets.Usage), since other replicas charge
// the same subjects.
func OpenPostgres(ctx context.Context, url string, d Durability, timeout time.Duration) (*DB, error) {
	if d == "" {
		d = DurabilityFull
	}
	if _, err := ParseDurability(string(d)); err != nil {
		return nil, fmt.Errorf("open ledger %s: durability %w", database.Redact(url), err)
	}
	sqlDB, err := database.OpenPostgres(ctx, url, timeout)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	db := &DB{Now: time.Now, path: database.Redact(url), durability: d, pg: true,
		writer: make(chan struct{}, 1), charges: newChargeCache(), db: sqlDB}
	if err := database.WithLock(ctx, sqlDB, "svc/migrate", func(conn *sql.Conn) error { return db.migrate(ctx, conn) }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", db.path, err)
	}
	return db, nil
}

// Postgres reports whether db is a PostgreSQL database.
func (db *DB) Postgres() bool { return db.pg }

// migrationGlob names the migrations of db's dialect.
func (db *DB) migrationGlob() string {
	if db.pg {
		return "migrations/postgres/*.sql"
	}
	return "migrations/*.sql"
}

// returning is the clause that makes an insert of db's dialect return the
// id of its row: PostgreSQL's driver has no LastInsertId.
func (db *DB) returning(column string) string {
	if db.pg {
		return " RETURNING " + column
	}
	return ""
}

// insertID runs the insert stmt (prepared with returning) with args and
// returns the id of its row.
func (db *DB) insertID(ctx context.Context, stmt *sql.Stmt, args ...any) (int64, error) {
	if db.pg {
		var id int64
		err := stmt.QueryRowContext(ctx, args...).Scan(&id)
		return id, err
	}
	res, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// releaseTimeout bounds the release of subject locks (LockSubjects).
const releaseTimeout = 5 * time.Second

// LockSubjects takes PostgreSQL's advisory lock of each budget subject
// named, in order, on one connection of its own, and returns their
// release: engines on one database (replicas) decide for a subject one at
// a time (engine.SubjectLocker). The wait ends with ctx, and at the
// statement timeout. A lock whose release fails is released by closing
// its connection.
func (db *DB) LockSubjects(ctx context.Context, names []string) (func(), error) {
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock budget subjects: %w", err)
	}
	keys := make([]int64, len(names))
	for i, name := range names {
		keys[i] = database.LockKey("subject/" + name)
	}
	// One round trip: unnest yields the keys in order, and each row's lock
	// is taken as the row is produced.
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(k) FROM unnest(CAST(? AS BIGINT[])) AS k`, keys); err != nil {
		discard(conn)
		return nil, fmt.Errorf("lock budget subjects %q: %w", names, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
			discard(conn)
			return
		}
		_ = conn.Close() // back to the pool
	}, nil
}

// discard closes conn rather than return it to the pool, which ends its
// server session and with it every advisory lock it holds.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
