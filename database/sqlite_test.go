package database_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/database"
)

// openWAL opens a SQLite file in WAL mode with driver, with a table to
// write into.
func openWAL(t *testing.T, driver, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, "file:"+path+"?_journal_mode=WAL&_synchronous=NORMAL")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec("CREATE TABLE IF NOT EXISTS t (b BLOB)")
	require.NoError(t, err)
	return db
}

func TestSQLiteDriverTurnsAutomaticCheckpointsOff(t *testing.T) {
	for driver, want := range map[string]int{database.SQLite: 0, "sqlite3": 1000} {
		t.Run(driver, func(t *testing.T) {
			db := openWAL(t, driver, filepath.Join(t.TempDir(), "x.db"))
			db.SetMaxOpenConns(3)
			conns := make([]*sql.Conn, 3) // every connection of the pool, not only the first
			for i := range conns {
				c, err := db.Conn(context.Background())
				require.NoError(t, err)
				defer c.Close()
				conns[i] = c
			}
			for _, c := range conns {
				var n int
				require.NoError(t, c.QueryRowContext(context.Background(), "PRAGMA wal_autocheckpoint").Scan(&n))
				assert.Equal(t, want, n)
			}
		})
	}
}

// size is the size of the file at path.
func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

func TestCheckpointCopiesTheLogIntoTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db := openWAL(t, database.SQLite, path)
	for range 300 { // some 600 pages of 4 KiB: under the 1,000 of an automatic checkpoint
		_, err := db.Exec("INSERT INTO t VALUES (?)", strings.Repeat("x", 5000))
		require.NoError(t, err)
	}
	before := size(t, path)
	require.Less(t, before, int64(100_000), "nothing but Checkpoint may copy the log into the file")
	stop := database.Checkpoint(db, database.CheckpointConfig{Every: 5 * time.Millisecond, Exclusive: unused(t),
		Failed: func(err error) { t.Errorf("checkpoint failed: %v", err) }})
	defer stop()
	assert.Eventually(t, func() bool { return size(t, path) > 1_500_000 }, 10*time.Second, 5*time.Millisecond,
		"the rows reach the database file")
}

// unused is an Exclusive that a test does not expect to be called.
func unused(t *testing.T) func(context.Context, func()) error {
	return func(context.Context, func()) error {
		t.Error("Exclusive called")
		return nil
	}
}

// TestCheckpointBoundsTheLog writes without pause, as a busy engine does: a
// checkpoint beside the commits seldom finds the log copied whole, so
// without the copy under Exclusive SQLite would go on appending to the log
// (130 MB here when Exclusive runs nothing).
func TestCheckpointBoundsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db := openWAL(t, database.SQLite, path)
	var writer sync.Mutex // the process's commits, as the ledger's writer lock
	exclusive := func(_ context.Context, fn func()) error {
		writer.Lock()
		defer writer.Unlock()
		fn()
		return nil
	}
	stop := database.Checkpoint(db, database.CheckpointConfig{Every: 5 * time.Millisecond, Exclusive: exclusive,
		Failed: func(err error) { t.Errorf("checkpoint failed: %v", err) }})
	defer stop()
	// As a decision's commit: a few pages changed, most of them changed
	// again soon; 30,000 rows are some 60,000 pages of log, 240 MB, without
	// the restarts.
	row := strings.Repeat("x", 100)
	for range 30_000 {
		writer.Lock()
		_, err := db.Exec("INSERT INTO t VALUES (?)", row)
		writer.Unlock()
		require.NoError(t, err)
	}
	assert.Less(t, size(t, path+"-wal"), int64(64<<20), "the log is written again from its start")
}

func TestCheckpointReportsAFailureOnceAndStops(t *testing.T) {
	db := openWAL(t, database.SQLite, filepath.Join(t.TempDir(), "x.db"))
	require.NoError(t, db.Close()) // every checkpoint fails from now on
	var failures atomic.Int32
	var last atomic.Value
	stop := database.Checkpoint(db, database.CheckpointConfig{Every: time.Millisecond, Exclusive: unused(t), Failed: func(err error) {
		failures.Add(1)
		last.Store(err.Error())
	}})
	require.Eventually(t, func() bool { return failures.Load() == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // some fifty more failing checkpoints
	stop()
	assert.Equal(t, int32(1), failures.Load(), "a lasting failure is reported once")
	assert.Contains(t, last.Load(), "checkpoint the write-ahead log")
}
