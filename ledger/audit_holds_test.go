package ledger_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/envelope"
	"github.com/svc-dev/svc/holds"
	"github.com/svc-dev/svc/ledger"
)

// When the lines of a batch cannot be written (/dev/full) after its
// transaction committed, the hold it created is removed, the hold it
// resolved is pending again and the hold it consumed is approved again:
// neither copy keeps the batch, no unaudited approval stands, and an
// approval still stands for the one allow it was given for.
func TestCommitLinesFailureUndoesHoldWrites(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	store, err := holds.NewStore(ctx, db.SQL())
	require.NoError(t, err)
	withHolds := func(path string) *ledger.Audit {
		a, err := ledger.NewAudit(ctx, db, path, store, zerolog.New(zerolog.NewTestWriter(t)))
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, a.Close()) })
		return a
	}
	good, full := withHolds(filepath.Join(t.TempDir(), "audit.jsonl")), withHolds("/dev/full")
	now := time.Now()
	hold := engine.Hold{ID: "h1", DecisionID: "d1", Rule: "svc.policy/irreversible_broad_prod",
		Envelope: &envelope.Envelope{}, CreatedTS: now, ExpiresTS: now.Add(time.Hour)}
	status := func() string {
		h, err := store.Get(ctx, "h1", time.Now())
		if err != nil {
			require.ErrorIs(t, err, engine.ErrNotFound)
			return "none"
		}
		return h.Status
	}

	require.Error(t, full.Commit(ctx, engine.Entry{Records: decisionRecords("d1"), Create: &hold}))
	assert.Equal(t, "none", status(), "the created hold is removed")

	require.NoError(t, good.Commit(ctx, engine.Entry{Records: decisionRecords("d1"), Create: &hold}))
	approval := engine.HoldResolution{HoldID: "h1", Status: engine.HoldApproved,
		By: engine.Principal{Type: holds.TypeHuman, ID: "bob"}, Verified: true, At: time.Now()}
	approve := engine.Entry{Records: decisionRecords("d1")[1:], Resolve: &approval}
	require.Error(t, full.Commit(ctx, approve))
	assert.Equal(t, engine.HoldPending, status(), "the resolved hold is pending again")
	require.NoError(t, good.Commit(ctx, approve))
	assert.Equal(t, engine.HoldApproved, status())
	redeem := engine.Entry{Records: []engine.AuditRecord{{Kind: engine.EventDecision, Body: decision("d2")}},
		Consume: &engine.Consumption{HoldID: "h1", DecisionID: "d2", At: time.Now()}}
	require.Error(t, full.Commit(ctx, redeem))
	assert.Equal(t, engine.HoldApproved, status(), "the consumed hold is re-opened")

	require.NoError(t, good.Commit(ctx, redeem), "and can be redeemed once")
	assert.Equal(t, engine.HoldConsumed, status())
	assert.ErrorIs(t, good.Commit(ctx, redeem), engine.ErrConflict)
}
