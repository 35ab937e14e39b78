package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// sqlTotals sums a session's charges in SQLite directly, bypassing the
// cache.
func sqlTotals(t *testing.T, db *ledger.DB, session string, since time.Time) engine.Totals {
	t.Helper()
	var got engine.Totals
	require.NoError(t, db.SQL().QueryRowContext(context.Background(), `SELECT COALESCE(SUM(deletes), 0),
		COALESCE(SUM(external_sends), 0), COALESCE(SUM(objects), 0) FROM charges
		WHERE session_id = ? AND at_ms >= ?`, session, since.UnixMilli()).Scan(&got.Deletes, &got.ExternalSends, &got.Objects))
	return got
}

// The cached totals always equal SQLite's sum: over a random walk of
// commits, reads with moving and earlier windows, a failing commit and a
// prune, across more sessions than are cached at once.
func TestBudgetsTotalsMatchSQLite(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	b, err := ledger.NewBudgets(ctx, db)
	require.NoError(t, err)
	a := newAudit(t, db, "")
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	for step := range 6000 {
		now = now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		session := fmt.Sprintf("s%d", rng.IntN(40))
		if step%500 == 499 {
			session = fmt.Sprintf("many-%d", step) // push sessions through the LRU
		}
		window := []time.Duration{time.Minute, 10 * time.Minute, time.Hour}[rng.IntN(3)]
		since := now.Add(-window)
		got, err := b.Totals(ctx, session, since)
		require.NoError(t, err)
		require.Equal(t, sqlTotals(t, db, session, since), got, "step %d session %s", step, session)
		c := charge(session, now, int64(rng.IntN(2)), int64(rng.IntN(2)), int64(rng.IntN(5)))
		c.DecisionID = fmt.Sprintf("d%d", step)
		require.NoError(t, a.Commit(ctx, engine.Entry{Records: decisionRecords(c.DecisionID), Charge: &c}))
		switch step {
		case 3000:
			_, err := b.Prune(ctx, now.Add(-5*time.Minute))
			require.NoError(t, err)
		case 4000: // a commit that fails leaves no charge, cached or stored
			_, err := db.SQL().ExecContext(ctx, `ALTER TABLE audit RENAME TO audit_away`)
			require.NoError(t, err)
			c2 := charge(session, now, 5, 5, 5)
			require.Error(t, a.Commit(ctx, engine.Entry{Records: decisionRecords("lost"), Charge: &c2}))
			_, err = db.SQL().ExecContext(ctx, `ALTER TABLE audit_away RENAME TO audit`)
			require.NoError(t, err)
		}
	}
}

// A session with more charges in its window than the cache keeps is summed
// by SQLite, every one counted, read after read.
func TestBudgetsTotalsOfAHeavySession(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	b, err := ledger.NewBudgets(ctx, db)
	require.NoError(t, err)
	a := newAudit(t, db, "")
	const n = 300 // more than the cache keeps for one session
	for i := range n {
		c := charge("heavy", t0.Add(time.Duration(i)*time.Second), 1, 0, 2)
		c.DecisionID = fmt.Sprintf("d%d", i)
		require.NoError(t, a.Commit(ctx, engine.Entry{Records: decisionRecords(c.DecisionID), Charge: &c}))
	}
	since := t0.Add(-time.Minute)
	for range 2 {
		got, err := b.Totals(ctx, "heavy", since)
		require.NoError(t, err)
		require.Equal(t, engine.Totals{Deletes: n, Objects: 2 * n}, got)
		require.Equal(t, sqlTotals(t, db, "heavy", since), got)
	}
}
