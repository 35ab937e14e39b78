package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/database/pgtest"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// TestPruneAuditKeepsWhatReconciliationReads: old mirror rows go, except
// the newest 4096 regular rows (which the start-up reconciliation with the
// JSONL file reads) and everything after them, and rows newer than the
// cut-off.
// It runs on SQLite and PostgreSQL (whose versions before 16 require a
// name for every subquery in FROM).
func TestPruneAuditKeepsWhatReconciliationReads(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { testPruneAudit(t, openKind(t, kind)) })
	}
}

// openKind opens an empty store of kind sqlite or postgres.
func openKind(t *testing.T, kind string) *ledger.DB {
	ctx := context.Background()
	var db *ledger.DB
	var err error
	if kind == "postgres" {
		db, err = ledger.OpenPostgres(ctx, pgtest.URL(t), ledger.DurabilityOS, 5*time.Second)
	} else {
		db, err = ledger.Open(ctx, filepath.Join(t.TempDir(), "svc.db"), ledger.DurabilityOS)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func testPruneAudit(t *testing.T, db *ledger.DB) {
	ctx := context.Background()
	cut := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	oldMS, newMS := cut.Add(-time.Hour).UnixMilli(), cut.Add(time.Hour).UnixMilli()
	tx, err := db.SQL().Begin()
	require.NoError(t, err)
	insert := func(ts int64, body string) {
		_, err := tx.Exec(`INSERT INTO audit (ts_ms, kind, body) VALUES (?, 'decision', ?)`, ts, body)
		require.NoError(t, err)
	}
	// seq 1-5000 old regular rows, 5001-5010 old degraded rows, 5011-5020
	// new regular rows.
	for i := range 5000 {
		insert(oldMS, fmt.Sprintf(`{"n":%d}`, i))
	}
	for i := range 10 {
		insert(oldMS, fmt.Sprintf(`{"n":%d,"degraded":true}`, i))
	}
	for i := range 10 {
		insert(newMS, fmt.Sprintf(`{"n":%d}`, 5000+i))
	}
	require.NoError(t, tx.Commit())

	n, err := db.Prune(ctx, cut, ledger.PruneAudit)
	require.NoError(t, err)
	// The newest 4096 regular rows are seq 915-5000 and 5011-5020: seq
	// 1-914 go.
	assert.EqualValues(t, 914, n)
	var lo, hi, count int64
	require.NoError(t, db.SQL().QueryRow(`SELECT min(seq), max(seq), count(*) FROM audit`).Scan(&lo, &hi, &count))
	assert.Equal(t, []int64{915, 5020, 5020 - 914}, []int64{lo, hi, count})

	n, err = db.Prune(ctx, cut.Add(24*time.Hour), ledger.PruneAudit)
	require.NoError(t, err)
	assert.Zero(t, n, "what reconciliation reads stays, however old")
}

// TestPruneSettledHoldsOnBothStores: the settled-holds prune (package
// holds, run by svc's retention beside the audit prune) on SQLite and
// PostgreSQL: an old consumed hold goes, an old pending one stays.
func TestPruneSettledHoldsOnBothStores(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			db := openKind(t, kind)
			_, err := holds.NewStore(ctx, db.SQL())
			require.NoError(t, err)
			cut := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			old := cut.Add(-48 * time.Hour).UnixMilli()
			for _, h := range []struct{ id, status string }{{"gone", "consumed"}, {"kept", "pending"}} {
				_, err := db.SQL().ExecContext(ctx, `INSERT INTO holds (id, status, rule, reason, envelope, envelope_hash,
					params_hash, agent_id, on_behalf_of, session_id, created_ms, expires_ms, decided_ms, consumed_ms, decision_id)
					VALUES (?, ?, 'r', 'why', '{}', 'h', 'p', 'a', 'o', 's', ?, ?, ?, ?, 'd')`, h.id, h.status, old, old, old, old)
				require.NoError(t, err)
			}
			n, err := db.Prune(ctx, cut, holds.PruneSettled)
			require.NoError(t, err)
			assert.EqualValues(t, 1, n)
			var left string
			require.NoError(t, db.SQL().QueryRowContext(ctx, `SELECT id FROM holds`).Scan(&left))
			assert.Equal(t, "kept", left)
		})
	}
}
