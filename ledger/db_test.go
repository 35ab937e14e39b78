package ledger_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/ledger"
)

// openDB opens a database file in a fresh temporary directory and closes it
// when the test ends.
func openDB(t testing.TB) *ledger.DB {
	t.Helper()
	db, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "svc.db"), ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	return db
}

func TestOpenAppliesPragmas(t *testing.T) {
	for _, durability := range []ledger.Durability{"", ledger.DurabilityFull, ledger.DurabilityOS} {
		db, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "svc.db"), durability)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, db.Close()) })
		synchronous := "2" // FULL
		if durability == ledger.DurabilityOS {
			synchronous = "1" // NORMAL
		}
		for _, tc := range []struct {
			pragma string
			want   string
		}{
			{"journal_mode", "wal"},
			{"synchronous", synchronous},
			{"foreign_keys", "1"},
			{"busy_timeout", "5000"},
		} {
			t.Run(string(durability)+"/"+tc.pragma, func(t *testing.T) {
				var got string
				require.NoError(t, db.SQL().QueryRow("PRAGMA "+tc.pragma).Scan(&got))
				assert.Equal(t, tc.want, got)
			})
		}
	}
}

func TestParseDurability(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ledger.Durability
		err  string
	}{
		{"full", ledger.DurabilityFull, ""},
		{"os", ledger.DurabilityOS, ""},
		{"OS", ledger.DurabilityOS, ""},
		{"", "", `must be full or os, got ""`},
		{"normal", "", `must be full or os, got "normal"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ledger.ParseDurability(tc.in)
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "svc.db"), "sometimes")
	assert.ErrorContains(t, err, `durability must be full or os, got "sometimes"`)
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svc.db")
	for range 3 {
		db, err := ledger.Open(ctx, path, ledger.DurabilityFull)
		require.NoError(t, err)
		_, err = db.SQL().ExecContext(ctx, `INSERT INTO audit (ts_ms, kind, body) VALUES (1, 'decision', '{}')`)
		require.NoError(t, err)
		require.NoError(t, db.Close())
	}

	db, err := ledger.Open(ctx, path, ledger.DurabilityFull)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	var names []string
	rows, err := db.SQL().QueryContext(ctx, `SELECT name FROM migrations ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"ledger/0001_charges.sql", "ledger/0002_audit.sql", "ledger/0003_charges_covering.sql", "ledger/0004_charges_subjects.sql"}, names)
	var audits int
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM audit`).Scan(&audits))
	assert.Equal(t, 3, audits, "rows survive reopening")
}

func TestOpenEphemeralRemovedOnClose(t *testing.T) {
	db, err := ledger.Open(context.Background(), "", ledger.DurabilityFull)
	require.NoError(t, err)
	dir := filepath.Dir(db.Path())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	_, err = db.SQL().Exec(`INSERT INTO charges (session_id, decision_id, at_ms, deletes, external_sends, objects)
		VALUES ('s', 'd', 1, 1, 0, 0)`)
	require.NoError(t, err)

	require.NoError(t, db.Close())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NoError(t, db.Close(), "Close is idempotent")
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		path string
	}{
		{"missing directory", filepath.Join(dir, "missing", "svc.db")},
		{"directory", dir},
		{"query in path", filepath.Join(dir, "svc.db?mode=ro")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ledger.Open(context.Background(), tc.path, ledger.DurabilityFull)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.path)
		})
	}
}

// TestRemovedDatabaseIsNeverRecreated removes the database under an open
// DB and makes the pool open new connections: none may create an empty
// database at the path, which a restart would take for the real one.
func TestRemovedDatabaseIsNeverRecreated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svc.db")
	db, err := ledger.Open(ctx, path, ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	assert.True(t, db.Created())
	for _, suffix := range []string{"", "-wal", "-shm"} {
		require.NoError(t, os.Remove(path+suffix))
	}
	var conns []*sql.Conn
	for range 4 { // more than the pool keeps idle: new connections are opened
		c, err := db.SQL().Conn(ctx)
		if err == nil {
			conns = append(conns, c)
			_, _ = c.ExecContext(ctx, "SELECT 1")
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	assert.NoFileExists(t, path)

	again, err := ledger.Exists(path)
	require.NoError(t, err)
	assert.False(t, again)
}

// TestOpenCreatesPrivateFiles: a new database, its write-ahead log and its
// shared-memory file are readable by their owner only, as the audit log
// is; Writable takes the write lock and commits nothing.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	db, err := ledger.Open(context.Background(), path, ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	require.NoError(t, db.Writable(context.Background()))
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), p)
	}
}

// TestWritableFailsWhenTheFileIsGone: the readiness check of the database
// fails once its file is removed, as every write then does.
func TestWritableFailsWhenTheFileIsGone(t *testing.T) {
	db := openDB(t)
	require.NoError(t, os.Remove(db.Path()))
	assert.ErrorContains(t, db.Writable(context.Background()), "missing")
}
