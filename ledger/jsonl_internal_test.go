package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/holds"
)

// fileLines returns the lines of the file at path, "" when it is missing.
func fileLines(t *testing.T, path string) []string {
	t.Helper()
	body, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
}

// An audit file removed or renamed away (log rotation) while svc runs is
// re-created at its path: the next records land there, not in a file that
// is gone or rotated. Under DurabilityOS the rotated file is synced before
// it is let go.
func TestAuditFileRemovedOrRotated(t *testing.T) {
	for _, d := range []Durability{DurabilityFull, DurabilityOS} {
		for _, tc := range []struct {
			name    string
			rotated string // the old file's new name; "" when it is removed
		}{
			{"removed", ""},
			{"rotated", "audit.jsonl.1"},
		} {
			t.Run(string(d)+"/"+tc.name, func(t *testing.T) {
				a, probe, path := probedAudit(t, d, never)
				recordN(t, a, 0, 2)
				if tc.rotated == "" {
					require.NoError(t, os.Remove(path))
				} else {
					tc.rotated = filepath.Join(filepath.Dir(path), tc.rotated)
					require.NoError(t, os.Rename(path, tc.rotated))
				}
				calls := probe.calls.Load()
				recordN(t, a, 2, 2)

				lines := fileLines(t, path)
				require.Len(t, lines, 2, "the file at the path holds the records made since")
				assert.Contains(t, lines[0], `"d2"`)
				assert.Contains(t, lines[1], `"d3"`)
				if tc.rotated != "" {
					old := fileLines(t, tc.rotated)
					require.Len(t, old, 2, "the rotated file keeps its records, and only those")
					assert.Contains(t, old[1], `"d1"`)
				}
				if d == DurabilityOS && tc.rotated != "" {
					assert.Equal(t, calls+1, probe.calls.Load(), "the rotated file is synced once, when let go")
				}
				assert.Len(t, records(t, a), 4)
			})
		}
	}
}

// Under DurabilityOS, a rotated file whose lines cannot be synced when it is
// let go fails the batch, and the audit log like any failed flush.
func TestAuditRotatedFileSyncFailure(t *testing.T) {
	a, probe, path := probedAudit(t, DurabilityOS, never)
	recordN(t, a, 0, 1)
	require.NoError(t, os.Rename(path, path+".1"))
	probe.failing.Store(true)
	err := a.Record(context.Background(), engine.EventDecision, map[string]string{"decision_id": "d1"})
	require.ErrorIs(t, err, syscall.EIO)
	probe.failing.Store(false)
	assert.ErrorIs(t, a.flush(), syscall.EIO, "the failure sticks: the rotated lines may not be on disk")
}

// An audit file that cannot be re-created at its path refuses the batch.
func TestAuditFileNotRecreatable(t *testing.T) {
	a, _, path := probedAudit(t, DurabilityFull, never)
	recordN(t, a, 0, 1)
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o700)) // the path now names a directory

	err := a.Record(context.Background(), engine.EventDecision, map[string]string{"decision_id": "d1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Len(t, records(t, a), 1, "no mirror row without its line")
}

func records(t *testing.T, a *Audit) []AuditRow {
	t.Helper()
	rows, err := a.Records(context.Background(), "")
	require.NoError(t, err)
	return rows
}

// truncateProbe refuses every truncation, as an append-only file (chattr
// +a) does; that needs root and a filesystem that supports the attribute,
// so the fault is injected.
func truncateProbe(*os.File, int64) error { return syscall.EPERM }

// voidedAudit returns an audit log with a hold store (auditWithHolds),
// whose file refuses truncation when appendOnly is set.
func voidedAudit(t *testing.T, appendOnly bool) (*Audit, *holds.Store, string) {
	t.Helper()
	a, store, path := auditWithHolds(t)
	if appendOnly {
		a.file.truncate = truncateProbe // no batch is in progress yet
	}
	return a, store, path
}

// approvedHold creates a hold and approves it, as a require_approval
// decision and a resolver would: two lines.
func approvedHold(t *testing.T, a *Audit) engine.Hold {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	h := engine.Hold{ID: "h1", DecisionID: "d-held", Rule: "svc.policy/irreversible_broad_prod",
		Envelope: &envelope.Envelope{}, CreatedTS: now, ExpiresTS: now.Add(time.Hour)}
	require.NoError(t, a.Commit(ctx, engine.Entry{
		Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: map[string]string{"decision_id": "d-held"}}},
		Create:  &h,
	}))
	require.NoError(t, a.Commit(ctx, engine.Entry{
		Records: []engine.AuditRecord{{Kind: engine.EventHoldResolution, Body: map[string]string{"decision_id": "d-held"}}},
		Resolve: &engine.HoldResolution{HoldID: h.ID, Status: engine.HoldApproved,
			By: engine.Principal{Type: "human", ID: "bob"}, Verified: true, At: now},
	}))
	return h
}

// When the mirror refuses a batch whose lines are written and they cannot
// be truncated away (an append-only file), each line is followed by a
// voided record naming it, synced to disk: a re-submission answered deny
// does not read as allowed. The consumption it carried is not stored.
func TestFailedBatchLinesAreVoided(t *testing.T) {
	for _, appendOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "truncated", true: "append-only"}[appendOnly], func(t *testing.T) {
			ctx := context.Background()
			a, store, path := voidedAudit(t, appendOnly)
			h := approvedHold(t, a)
			_, err := a.db.SQL().ExecContext(ctx, `DROP TABLE audit`)
			require.NoError(t, err)

			allow := map[string]string{"decision_id": "d-redeem", "verdict": "allow"}
			err = a.Commit(ctx, engine.Entry{
				Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: allow},
					{Kind: engine.EventHoldResolution, Body: map[string]string{"decision_id": "d-held", "status": "consumed"}}},
				Consume: &engine.Consumption{HoldID: h.ID, DecisionID: "d-redeem", At: time.Now()},
			})
			require.Error(t, err)
			got, err := store.Get(ctx, h.ID, time.Now())
			require.NoError(t, err)
			assert.Equal(t, engine.HoldApproved, got.Status, "the consumption is not stored")

			lines := fileLines(t, path)
			if !appendOnly {
				require.Len(t, lines, 2, "the failed batch's lines are truncated away")
				return
			}
			require.Len(t, lines, 6, "creation, approval, failed batch (2), voided (2)")
			for i, want := range []struct{ event, id string }{
				{engine.EventDecision, "d-redeem"}, {engine.EventHoldResolution, "d-held"},
			} {
				var v voided
				require.NoError(t, json.Unmarshal([]byte(lines[4+i]), &v))
				sum := sha256.Sum256([]byte(lines[2+i]))
				assert.Equal(t, voided{TS: v.TS, Event: KindVoided, VoidedEvent: want.event, DecisionID: want.id,
					LineSHA256: hex.EncodeToString(sum[:]), Reason: voidReason}, v)
			}
		})
	}
}

// When the fsync of a batch fails and its lines cannot be truncated away,
// they are voided; if the voided records cannot be written either, that is
// logged at error level.
func TestFailedAppendLinesAreVoided(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fsyncs int64 // failing fsyncs from the batch's on
		logged string
	}{
		{"voided", 1, "voided records follow them"},
		{"void fails too", 2, "cannot void the lines of a failed batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _, path := voidedAudit(t, true)
			logs := &LogBuffer{}
			a.log = zerolog.New(logs)
			var failures atomic.Int64
			failures.Store(tc.fsyncs)
			a.file.fsync = func(f *os.File) error {
				if failures.Add(-1) >= 0 {
					return syscall.EIO
				}
				return f.Sync()
			}
			err := a.Record(context.Background(), engine.EventDecision, map[string]string{"decision_id": "d1"})
			require.ErrorIs(t, err, syscall.EIO)
			assert.Empty(t, records(t, a), "no mirror row")
			lines := fileLines(t, path)
			require.Len(t, lines, 2, "the line and its voided record (written, if not flushed)")
			assert.Contains(t, lines[0], `"d1"`)
			assert.Contains(t, lines[1], `"event":"voided"`)
			assert.Contains(t, logs.String(), tc.logged)
		})
	}
}
