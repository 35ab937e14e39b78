package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// The tests run as root in CI, which writes through a read-only mode, so an
// unwritable file is produced by a directory, a missing parent and /dev/full
// (opens fine, every write fails with ENOSPC).
func TestAuditUnwritablePath(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(dir string) string
	}{
		{"directory", func(dir string) string { return dir }},
		{"missing parent directory", func(dir string) string { return filepath.Join(dir, "missing", "audit.jsonl") }},
		{"device without space", func(string) string { return "/dev/full" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t.TempDir())
			a := newAudit(t, openDB(t), path) // construction must not fail
			for range 2 {
				err := a.Record(context.Background(), engine.EventDecision, decision("d1"))
				require.Error(t, err, "an unwritable audit log must never acknowledge a record")
				assert.Contains(t, err.Error(), path)
			}
			assert.Empty(t, records(t, a, ""), "the batch fails as a unit: no mirror row either")
		})
	}
}

func TestAuditRetriesOpen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "audit.jsonl")
	a := newAudit(t, openDB(t), path)
	require.Error(t, a.Record(ctx, engine.EventDecision, decision("d1")))

	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, a.Record(ctx, engine.EventDecision, decision("d2")))

	lines := readLines(t, path)
	require.Len(t, lines, 1)
	assert.Contains(t, string(lines[0]), `"decision_id":"d2"`)
	rows := records(t, a, "")
	require.Len(t, rows, 1)
	assert.Equal(t, "d2", rows[0].DecisionID)
}

func TestAuditMirrorFailureRemovesLines(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	db := openDB(t)
	a := newAudit(t, db, path)
	require.NoError(t, a.Record(ctx, engine.EventDecision, decision("d1")))

	_, err := db.SQL().ExecContext(ctx, `DROP TABLE audit`)
	require.NoError(t, err)
	require.Error(t, a.Record(ctx, engine.EventDecision, decision("d2")))

	lines := readLines(t, path)
	require.Len(t, lines, 1, "the failed batch's line is truncated away")
	assert.Contains(t, string(lines[0]), `"decision_id":"d1"`)
}

func TestAuditTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"event":"decision"}`+"\n"+`{"event":"dec`), 0o600))
	a := newAudit(t, openDB(t), path)
	require.NoError(t, a.Record(context.Background(), engine.EventDecision, decision("d1")))

	body, err := os.ReadFile(path)
	require.NoError(t, err)
	want := `{"event":"decision"}` + "\n" + `{"event":"dec` + "\n" + `{"ts":`
	require.Greater(t, len(body), len(want))
	assert.Equal(t, want, string(body[:len(want)]), "the new record starts its own line")
	assert.Equal(t, byte('\n'), body[len(body)-1])
}

func TestAuditClose(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, openDB(t), path)
	require.NoError(t, a.Record(ctx, engine.EventDecision, decision("d1")))

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	require.Error(t, a.Record(ctx, engine.EventDecision, decision("d2")))
	assert.Len(t, readLines(t, path), 1)
	assert.Len(t, records(t, a, ""), 1)
}

func TestAuditCloseDuringRecords(t *testing.T) {
	const n = 100
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, openDB(t), path)

	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs <- a.Record(context.Background(), engine.EventDecision, decision(fmt.Sprintf("d%03d", i)))
		})
	}
	require.NoError(t, a.Close())
	wg.Wait()
	close(errs)

	acked := 0
	for err := range errs {
		if err == nil {
			acked++
		}
	}
	// Close lets queued records finish and refuses later ones; either way
	// every acknowledged record, and no other, is in both copies.
	assert.Len(t, readLines(t, path), acked)
	assert.Len(t, records(t, a, ""), acked)
}

// TestAuditWritable: the readiness check of the audit log fails while its
// path cannot be opened for appending, and while the last append failed
// (a device that opens but takes no byte), and passes again once an append
// succeeds.
func TestAuditWritable(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "logs")
	a := newAudit(t, openDB(t), filepath.Join(dir, "audit.jsonl"))
	assert.ErrorContains(t, a.Writable(), "open audit log")
	require.NoError(t, os.Mkdir(dir, 0o700))
	assert.NoError(t, a.Writable())
	require.NoError(t, a.Record(ctx, engine.EventDecision, decision("d1")))
	assert.NoError(t, a.Writable())

	full := newAudit(t, openDB(t), "/dev/full")
	assert.NoError(t, full.Writable(), "it opens")
	require.Error(t, full.Record(ctx, engine.EventDecision, decision("d2")))
	assert.ErrorContains(t, full.Writable(), "the last append failed")

	assert.NoError(t, newAudit(t, openDB(t), "").Writable(), "no file, nothing to check")
}
