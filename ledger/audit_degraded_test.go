package ledger_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// sinks is an audit log whose database and JSONL file live in directories
// of their own, so that a test can break either.
type sinks struct {
	db      *ledger.DB
	audit   *ledger.Audit
	dbPath  string
	logPath string
	logs    *ledger.LogBuffer
}

func newSinks(t *testing.T) *sinks {
	t.Helper()
	ctx := context.Background()
	s := &sinks{dbPath: filepath.Join(t.TempDir(), "svc.db"),
		logPath: filepath.Join(t.TempDir(), "logs", "audit.jsonl"), logs: &ledger.LogBuffer{}}
	require.NoError(t, os.Mkdir(filepath.Dir(s.logPath), 0o700))
	var err error
	s.db, err = ledger.Open(ctx, s.dbPath, ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.db.Close()) })
	log := zerolog.New(zerolog.MultiLevelWriter(s.logs, zerolog.NewTestWriter(t)))
	s.audit, err = ledger.NewAudit(ctx, s.db, s.logPath, nil, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.audit.Close() }) // a broken file may fail the final flush
	return s
}

// removeDB deletes the database file and its companions, as an operator's
// rm of svc.db* would.
func (s *sinks) removeDB(t *testing.T) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		require.NoError(t, os.Remove(s.dbPath+suffix))
	}
}

// breakMirror makes the mirror refuse every insert.
func (s *sinks) breakMirror(t *testing.T) {
	t.Helper()
	_, err := s.db.SQL().ExecContext(context.Background(), `DROP TABLE audit`)
	require.NoError(t, err)
}

// breakFile removes the JSONL file's directory, so that it cannot be
// opened again.
func (s *sinks) breakFile(t *testing.T) {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Dir(s.logPath)))
}

// fileHas reports whether the JSONL file has a line with decision id.
func (s *sinks) fileHas(t *testing.T, id string) bool {
	t.Helper()
	body, err := os.ReadFile(s.logPath)
	if os.IsNotExist(err) {
		return false
	}
	require.NoError(t, err)
	return bytes.Contains(body, []byte(`"decision_id":"`+id+`"`))
}

// mirrorHas reports whether the mirror has a row of decision id.
func (s *sinks) mirrorHas(t *testing.T, id string) bool {
	t.Helper()
	for _, r := range records(t, s.audit, "") {
		if r.DecisionID == id {
			return true
		}
	}
	return false
}

// lockDB holds an exclusive lock on the database from another connection
// until the test ends, as another process could.
func lockDB(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	other, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	conn, err := other.Conn(ctx)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `BEGIN EXCLUSIVE`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := conn.ExecContext(ctx, `ROLLBACK`)
		assert.NoError(t, err)
		assert.NoError(t, conn.Close())
		assert.NoError(t, other.Close())
	})
}

// A database file removed or replaced while svc runs fails every write of
// the decision path, instead of taking them with it; it is logged once.
func TestDatabaseFileGoneFailsWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(s *sinks, t *testing.T)
	}{
		{"removed", (*sinks).removeDB},
		{"replaced", func(s *sinks, t *testing.T) {
			other := filepath.Join(t.TempDir(), "other.db")
			db, err := ledger.Open(context.Background(), other, ledger.DurabilityFull)
			require.NoError(t, err)
			require.NoError(t, db.Close())
			require.NoError(t, os.Rename(other, s.dbPath))
		}},
		{"write-ahead log removed", func(s *sinks, t *testing.T) { require.NoError(t, os.Remove(s.dbPath+"-wal")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newSinks(t)
			freeze, err := ledger.NewFreeze(ctx, s.db)
			require.NoError(t, err)
			require.NoError(t, s.audit.Record(ctx, engine.EventDecision, decision("before")))
			tc.fault(s, t)

			for _, id := range []string{"after-1", "after-2"} {
				err := s.audit.Record(ctx, engine.EventDecision, decision(id))
				require.Error(t, err, "a commit into a database that is gone is refused")
				assert.Contains(t, err.Error(), "database file removed or replaced while svc runs")
				assert.False(t, s.fileHas(t, id), "the refused batch's line is rolled back")
			}
			err = freeze.SaveFreeze(ctx, engine.FreezeState{Frozen: true, By: "human:bob", UpdatedTS: time.Now()})
			assert.ErrorContains(t, err, "database file removed or replaced while svc runs")
			assert.Equal(t, 1, s.logs.Count("ledger database removed or replaced while svc runs"), "logged once")
		})
	}
}

// RecordDegraded writes its record to each sink on its own: a failure of
// one leaves the record in the other, and it fails only when both fail.
func TestRecordDegraded(t *testing.T) {
	for _, tc := range []struct {
		name             string
		fault            func(s *sinks, t *testing.T)
		inFile, inMirror bool
	}{
		{"both work", func(*sinks, *testing.T) {}, true, true},
		{"mirror fails", (*sinks).breakMirror, true, false},
		{"database file removed", (*sinks).removeDB, true, false},
		{"file fails", (*sinks).breakFile, false, true},
		{"both fail", func(s *sinks, t *testing.T) { s.breakFile(t); s.breakMirror(t) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSinks(t)
			tc.fault(s, t)
			err := s.audit.RecordDegraded(context.Background(), engine.EventDecision, decision("deny-1"))
			if !tc.inFile && !tc.inMirror {
				require.ErrorContains(t, err, "no audit sink took the record")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.inFile, s.fileHas(t, "deny-1"), "in the file")
			if tc.inMirror {
				assert.True(t, s.mirrorHas(t, "deny-1"), "in the mirror")
			}
		})
	}
}

// Without a JSONL file, the mirror is the only sink.
func TestRecordDegradedMirrorOnly(t *testing.T) {
	db := openDB(t)
	a := newAudit(t, db, "")
	_, err := db.SQL().ExecContext(context.Background(), `DROP TABLE audit`)
	require.NoError(t, err)
	err = a.RecordDegraded(context.Background(), engine.EventDecision, decision("deny-1"))
	assert.ErrorContains(t, err, "no audit sink took the record")
}

// A mirror locked by another process past the caller's deadline does not
// hold RecordDegraded for SQLite's whole busy timeout; the file has the
// record.
// TestRecordDegradedDoesNotWaitForAStuckBatch: a degraded record queued
// behind a batch that waits for a lock returns at its deadline, and is
// written to the file when its turn comes.
func TestRecordDegradedDoesNotWaitForAStuckBatch(t *testing.T) {
	s := newSinks(t)
	lockDB(t, s.dbPath)
	stuck := make(chan error, 1)
	go func() { stuck <- s.audit.Record(context.Background(), engine.EventDecision, decision("stuck-1")) }()
	time.Sleep(100 * time.Millisecond) // the batch of stuck-1 is waiting for the lock by now
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = s.audit.RecordDegraded(ctx, engine.EventDecision, decision("deny-2"))
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "bounded by the deadline, not by the batch ahead (5 s)")
	require.Error(t, <-stuck, "the batch ahead fails at the busy timeout")
	require.Eventually(t, func() bool { return s.fileHas(t, "deny-2") }, 5*time.Second, 10*time.Millisecond,
		"the record is written when its batch comes")
}

func TestRecordDegradedMeetsItsDeadline(t *testing.T) {
	s := newSinks(t)
	lockDB(t, s.dbPath)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.audit.RecordDegraded(ctx, engine.EventDecision, decision("deny-1"))
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "bounded by the deadline, not the 5 s busy timeout")
	// The outcome comes within degradedGrace of the deadline, or, on a
	// loaded machine, later: then the call says the record stays queued,
	// and the file takes it all the same.
	if err != nil {
		assert.ErrorContains(t, err, "the record stays queued")
	}
	require.Eventually(t, func() bool { return s.fileHas(t, "deny-1") }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return s.logs.Count("audit mirror: a degraded record could not be written") == 1 },
		5*time.Second, 10*time.Millisecond)
}
