package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// chargedLedger is an audit log and the budgets of the same database.
func chargedLedger(t *testing.T) (*ledger.Audit, *ledger.Budgets, *ledger.DB, string) {
	t.Helper()
	db := openDB(t)
	b, err := ledger.NewBudgets(context.Background(), db)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	return newAudit(t, db, path), b, db, path
}

func countCharges(t *testing.T, db *ledger.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM charges`).Scan(&n))
	return n
}

// decisionRecords are the records of one decision that created a hold.
func decisionRecords(id string) []engine.AuditRecord {
	return []engine.AuditRecord{
		{Kind: engine.EventDecision, Body: decision(id)},
		{Kind: engine.EventHoldResolution, Body: engine.HoldEvent{Event: engine.EventHoldResolution,
			HoldID: "h-" + id, Status: engine.HoldPending, DecisionID: id}},
	}
}

func TestCommit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		charge  engine.Charge
		wantErr bool
		records int // lines and mirror rows
		charges int
	}{
		{"records and charge", charge("a", t0, 1, 2, 3), false, 2, 1},
		{"all-zero charge is not stored", charge("a", t0, 0, 0, 0), false, 2, 0},
		{"empty session refused before writing", charge("", t0, 1, 0, 0), true, 0, 0},
		{"zero time refused before writing", charge("a", time.Time{}, 1, 0, 0), true, 0, 0},
		{"negative count refused before writing", charge("a", t0, 5, -1, 0), true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, db, path := chargedLedger(t)
			err := a.Commit(ctx, engine.Entry{Records: decisionRecords(tc.charge.DecisionID), Charge: &tc.charge})
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Len(t, readLines(t, path), tc.records)
			rows := records(t, a, "")
			require.Len(t, rows, tc.records)
			for i, kind := range []string{engine.EventDecision, engine.EventHoldResolution}[:tc.records] {
				assert.Equal(t, kind, rows[i].Kind, "records keep their order")
				assert.Equal(t, tc.charge.DecisionID, rows[i].DecisionID)
			}
			assert.Equal(t, tc.charges, countCharges(t, db))
			if tc.charges > 0 {
				got, err := b.Totals(ctx, "a", t0)
				require.NoError(t, err)
				assert.Equal(t, tc.charge.Totals, got)
			}
		})
	}
}

// A commit whose charge cannot be stored fails as a whole: no line, no
// mirror row, for every record of the commit.
func TestCommitFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	a, _, db, path := chargedLedger(t)
	c := charge("a", t0, 1, 0, 1)
	require.NoError(t, a.Commit(ctx, engine.Entry{Records: decisionRecords("d1"), Charge: &c}))

	_, err := db.SQL().ExecContext(ctx, `DROP TABLE charges`)
	require.NoError(t, err)
	require.Error(t, a.Commit(ctx, engine.Entry{Records: decisionRecords("d2"), Charge: &c}))

	lines := readLines(t, path)
	require.Len(t, lines, 2, "the failed batch's lines are truncated away")
	for _, l := range lines {
		assert.Contains(t, string(l), `"decision_id":"d1"`)
	}
	assert.Len(t, records(t, a, ""), 2)
	assert.Error(t, a.Commit(ctx, engine.Entry{}), "a commit needs a record")
}

// Concurrent records and charges are group-committed: every one is stored
// exactly once, and each charge belongs to a mirrored decision.
func TestCommitConcurrent(t *testing.T) {
	const n = 120
	ctx := context.Background()
	a, b, db, path := chargedLedger(t)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("d%03d", i)
			c := charge(fmt.Sprintf("s%d", i%4), t0, 1, 0, 2)
			c.DecisionID = id
			if i%3 == 0 { // some decisions charge nothing, like a deny
				errs[i] = a.Record(ctx, engine.EventDecision, decision(id))
				return
			}
			errs[i] = a.Commit(ctx, engine.Entry{Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: decision(id)}}, Charge: &c})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "record %d", i)
	}
	assert.Len(t, readLines(t, path), n)
	assert.Len(t, records(t, a, ""), n)
	assert.Equal(t, n-n/3, countCharges(t, db))
	var orphans int
	require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM charges
		WHERE decision_id NOT IN (SELECT decision_id FROM audit WHERE decision_id IS NOT NULL)`).Scan(&orphans))
	assert.Zero(t, orphans)
	got, err := b.Totals(ctx, "s1", t0)
	require.NoError(t, err)
	assert.Equal(t, engine.Totals{Deletes: 20, Objects: 40}, got, "s1 took 20 of the 80 charges")
}

// The JSONL append and the mirror transaction run at once; when the lines
// cannot be written (here: every write to /dev/full fails with ENOSPC), the
// committed mirror rows and charge are deleted again.
func TestCommitLinesFailureUndoesTheMirror(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	b, err := ledger.NewBudgets(ctx, db)
	require.NoError(t, err)
	a := newAudit(t, db, "/dev/full")
	c := charge("a", t0, 1, 0, 1)
	require.Error(t, a.Commit(ctx, engine.Entry{Records: decisionRecords("d1"), Charge: &c}))
	assert.Empty(t, records(t, a, ""))
	assert.Zero(t, countCharges(t, db))
	totals, err := b.Totals(ctx, "a", t0.Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, engine.Totals{}, totals)
	assert.Error(t, a.Commit(ctx, engine.Entry{Records: decisionRecords("d2"),
		Create: &engine.Hold{ID: "h"}}), "a hold write needs the hold store")
}
