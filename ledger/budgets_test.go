package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// ledgerUnderTest is the budget ledger with the audit log that writes its
// charges (Audit.Commit is the one way a charge is stored).
type ledgerUnderTest struct {
	*ledger.Budgets
	audit *ledger.Audit
}

func newBudgets(t *testing.T) ledgerUnderTest {
	t.Helper()
	db := openDB(t)
	b, err := ledger.NewBudgets(context.Background(), db)
	require.NoError(t, err)
	return ledgerUnderTest{Budgets: b, audit: newAudit(t, db, "")}
}

// book stores c with the decision record it belongs to.
func (l ledgerUnderTest) book(ctx context.Context, c engine.Charge) error {
	return l.audit.Commit(ctx, engine.Entry{Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: decision(c.DecisionID)}}, Charge: &c})
}

func charge(session string, at time.Time, deletes, sends, objects int64) engine.Charge {
	return engine.Charge{
		SessionID:  session,
		DecisionID: session + "-" + at.Format(time.RFC3339Nano),
		At:         at,
		Totals:     engine.Totals{Deletes: deletes, ExternalSends: sends, Objects: objects},
	}
}

func TestBudgetsTotals(t *testing.T) {
	ctx := context.Background()
	b := newBudgets(t)
	for _, c := range []engine.Charge{
		charge("a", t0.Add(-time.Hour), 100, 100, 100), // outside every window below
		charge("a", t0, 1, 0, 5),
		charge("a", t0.Add(time.Minute), 2, 1, 7),
		charge("a", t0.Add(2*time.Minute), 0, 3, 0),
		charge("b", t0.Add(time.Minute), 10, 20, 30),
	} {
		require.NoError(t, b.book(ctx, c))
	}

	for _, tc := range []struct {
		name    string
		session string
		since   time.Time
		want    engine.Totals
	}{
		{"window start is inclusive", "a", t0, engine.Totals{Deletes: 3, ExternalSends: 4, Objects: 12}},
		{"one millisecond later excludes the boundary charge", "a", t0.Add(time.Millisecond),
			engine.Totals{Deletes: 2, ExternalSends: 4, Objects: 7}},
		{"wide window includes old charges", "a", t0.Add(-2 * time.Hour),
			engine.Totals{Deletes: 103, ExternalSends: 104, Objects: 112}},
		{"window after every charge", "a", t0.Add(time.Hour), engine.Totals{}},
		{"other session is separate", "b", t0, engine.Totals{Deletes: 10, ExternalSends: 20, Objects: 30}},
		{"unknown session", "c", t0.Add(-2 * time.Hour), engine.Totals{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.Totals(ctx, tc.session, tc.since)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBudgetsPrune(t *testing.T) {
	ctx := context.Background()
	b := newBudgets(t)
	for i := range 5 {
		require.NoError(t, b.book(ctx, charge("a", t0.Add(time.Duration(i)*time.Minute), 1, 0, 0)))
	}

	n, err := b.Prune(ctx, t0.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "charges strictly before the cut are deleted")
	got, err := b.Totals(ctx, "a", time.Time{})
	require.NoError(t, err)
	assert.Equal(t, engine.Totals{Deletes: 3}, got)

	n, err = b.Prune(ctx, t0.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Zero(t, n, "pruning again deletes nothing")
}

func TestBudgetsClosedDB(t *testing.T) {
	ctx := context.Background()
	db, err := ledger.Open(ctx, "", ledger.DurabilityFull)
	require.NoError(t, err)
	b, err := ledger.NewBudgets(ctx, db)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = b.Totals(ctx, "a", t0)
	assert.Error(t, err, "a fault in Totals must surface so the engine denies")
	_, err = ledger.NewBudgets(ctx, db)
	assert.Error(t, err)
}

// Sessions are charged concurrently (the engine serialises only within a
// session); every charge must land in its own session's totals.
func TestBudgetsConcurrentSessions(t *testing.T) {
	const sessions, perSession = 20, 10
	ctx := context.Background()
	b := newBudgets(t)
	var wg sync.WaitGroup
	errs := make(chan error, sessions*perSession)
	for s := range sessions {
		wg.Go(func() {
			for i := range perSession {
				at := t0.Add(time.Duration(i) * time.Second)
				errs <- b.book(ctx, charge(fmt.Sprintf("s%02d", s), at, 1, int64(s), 2))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for s := range sessions {
		got, err := b.Totals(ctx, fmt.Sprintf("s%02d", s), t0)
		require.NoError(t, err)
		assert.Equal(t, engine.Totals{Deletes: perSession, ExternalSends: int64(s * perSession), Objects: 2 * perSession}, got)
	}
}
