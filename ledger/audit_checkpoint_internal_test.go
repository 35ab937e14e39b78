package ledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileSize is the size of the file at path.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// TestAuditCheckpointsInTheBackground: no commit copies the write-ahead
// log into the database file (database.SQLite); the Audit does, within its
// interval, and stops at Close.
func TestAuditCheckpointsInTheBackground(t *testing.T) {
	for _, d := range []Durability{DurabilityFull, DurabilityOS} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "svc.db")
			db, err := Open(ctx, path, d)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, db.Close()) })
			var n int
			require.NoError(t, db.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&n))
			require.Zero(t, n, "commits do not checkpoint")
			before := fileSize(t, path)

			a, err := newAudit(ctx, db, "", nil, zerolog.New(zerolog.NewTestWriter(t)),
				intervals{flush: never, checkpoint: 5 * time.Millisecond})
			require.NoError(t, err)
			recordN(t, a, 0, 200)
			assert.Eventually(t, func() bool { return fileSize(t, path) > before }, 10*time.Second, 5*time.Millisecond,
				"the mirror rows reach the database file")
			require.NoError(t, a.Close())

			recordAfter := fileSize(t, path)
			_, err = db.db.ExecContext(ctx, "INSERT INTO audit (ts_ms, kind, body) VALUES (1, 'x', '{}')")
			require.NoError(t, err)
			time.Sleep(50 * time.Millisecond) // ten intervals
			assert.Equal(t, recordAfter, fileSize(t, path), "no checkpoint after Close")
		})
	}
}

// TestClosingTheDBStopsTheCheckpoints: the checkpoints end with the
// database even when the Audit is not closed first, rather than failing
// (and logging) at every interval on a closed pool.
func TestClosingTheDBStopsTheCheckpoints(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "svc.db"), DurabilityFull)
	require.NoError(t, err)
	var logs LogBuffer
	a, err := newAudit(ctx, db, "", nil, zerolog.New(&logs), intervals{flush: never, checkpoint: time.Millisecond})
	require.NoError(t, err)
	recordN(t, a, 0, 10)
	require.NoError(t, db.Close())
	time.Sleep(50 * time.Millisecond) // some fifty intervals
	assert.NotContains(t, logs.String(), "checkpoint", "no checkpoint ran on the closed database")
	require.NoError(t, a.Close())
}
