package holds_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// TestPruneSettledDeletesExactlyTheOldSettledHolds: of holds in every
// status, old and recent, only the rejected, expired and consumed ones
// whose every time is before the cut-off go; pending and approved holds
// stay however old they are.
func TestPruneSettledDeletesExactlyTheOldSettledHolds(t *testing.T) {
	ctx := context.Background()
	db := storeDB(t)

	cut := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	old, recent := cut.Add(-48*time.Hour), cut.Add(time.Hour)
	type row struct {
		id, status       string
		created, expires time.Time
		decided, used    *time.Time
	}
	ms := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UnixMilli()
	}
	oldDecided, recentDecided := old.Add(time.Minute), recent
	rows := []row{
		{"old-rejected", "rejected", old, old.Add(time.Hour), &oldDecided, nil},
		{"old-expired", "expired", old, old.Add(time.Hour), nil, nil},
		{"old-consumed", "consumed", old, old.Add(time.Hour), &oldDecided, &oldDecided},
		{"old-pending", "pending", old, old.Add(time.Hour), nil, nil},
		{"old-approved", "approved", old, old.Add(time.Hour), &oldDecided, nil},
		{"old-approved-unexpired", "approved", old, recent.Add(time.Hour), &oldDecided, nil},
		{"recent-rejected", "rejected", recent, recent.Add(time.Hour), &recentDecided, nil},
		{"recent-expired", "expired", recent, recent.Add(time.Hour), nil, nil},
		{"old-but-consumed-after-cut", "consumed", old, recent.Add(time.Hour), &oldDecided, &recentDecided},
		{"old-but-rejected-after-cut", "rejected", old, recent.Add(time.Hour), &recentDecided, nil},
	}
	for _, r := range rows {
		_, err := db.SQL().ExecContext(ctx, `INSERT INTO holds (id, status, rule, reason, envelope, envelope_hash,
			params_hash, agent_id, on_behalf_of, session_id, created_ms, expires_ms, decided_ms, consumed_ms, decision_id)
			VALUES (?, ?, 'r', 'why', '{}', 'h', 'p', 'a', 'o', 's', ?, ?, ?, ?, 'd')`,
			r.id, r.status, r.created.UnixMilli(), r.expires.UnixMilli(), ms(r.decided), ms(r.used))
		require.NoError(t, err)
	}
	n, err := db.Prune(ctx, cut, holds.PruneSettled)
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	assert.ElementsMatch(t, []string{"old-pending", "old-approved", "old-approved-unexpired", "recent-rejected",
		"recent-expired", "old-but-consumed-after-cut", "old-but-rejected-after-cut"}, holdIDs(t, db.SQL()))
}

// storeDB opens a database with the hold store's tables.
func storeDB(t *testing.T) *ledger.DB {
	db, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "svc.db"), ledger.DurabilityOS)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = holds.NewStore(context.Background(), db.SQL())
	require.NoError(t, err)
	return db
}

func holdIDs(t *testing.T, db *sql.DB) []string {
	rows, err := db.Query(`SELECT id FROM holds`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestPruneSettledInSmallBatches: more settled holds than a batch deletes
// all go, a batch at a time.
func TestPruneSettledInSmallBatches(t *testing.T) {
	ctx := context.Background()
	db := storeDB(t)
	total := 2*ledger.PruneBatchRows + 7
	tx, err := db.SQL().Begin()
	require.NoError(t, err)
	for i := range total {
		_, err := tx.Exec(`INSERT INTO holds (id, status, rule, reason, envelope, envelope_hash, params_hash, agent_id,
			on_behalf_of, session_id, created_ms, expires_ms, decision_id) VALUES (?, 'expired', 'r', 'w', '{}', 'h', 'p', 'a', 'o', 's', 1, 2, 'd')`, i)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	var batches []int64
	n, err := db.Prune(ctx, time.UnixMilli(10), func(ctx context.Context, tx *sql.Tx, before time.Time, limit int) (int64, error) {
		n, err := holds.PruneSettled(ctx, tx, before, limit)
		batches = append(batches, n)
		return n, err
	})
	require.NoError(t, err)
	assert.EqualValues(t, total, n)
	assert.Equal(t, []int64{ledger.PruneBatchRows, ledger.PruneBatchRows, 7}, batches)
	assert.Empty(t, holdIDs(t, db.SQL()))
}
