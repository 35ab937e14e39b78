package holds

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
)

// TestUndoWrites: the undo of a decision's hold write (its audit line
// failed after the transaction committed) reverts exactly that write, and
// leaves a hold that has moved on since as it is.
func TestUndoWrites(t *testing.T) {
	ctx := context.Background()
	approve := func(t *testing.T, s *Store, id string) {
		_, err := s.Resolve(ctx, id, engine.HoldResolution{Status: engine.HoldApproved,
			By: engine.Principal{Type: TypeHuman, ID: "alice"}, Verified: true, At: t0.Add(time.Second)})
		require.NoError(t, err)
	}
	consume := func(t *testing.T, s *Store, id, decision string) {
		_, err := s.Consume(ctx, id, decision, t0.Add(time.Minute))
		require.NoError(t, err)
	}
	cases := map[string]struct {
		setup      func(t *testing.T, s *Store)
		undo       func(s *Store, tx *sql.Tx) (bool, error)
		wantUndone bool
		wantStatus string // "" when the hold is gone
	}{
		"created, still pending": {
			undo:       func(s *Store, tx *sql.Tx) (bool, error) { return s.UndoCreateIn(ctx, tx, newHold("h", t0)) },
			wantUndone: true,
		},
		"created, approved since": {
			setup:      func(t *testing.T, s *Store) { approve(t, s, "h") },
			undo:       func(s *Store, tx *sql.Tx) (bool, error) { return s.UndoCreateIn(ctx, tx, newHold("h", t0)) },
			wantStatus: engine.HoldApproved,
		},
		"created by another decision": {
			undo: func(s *Store, tx *sql.Tx) (bool, error) {
				h := newHold("h", t0)
				h.DecisionID = "another"
				return s.UndoCreateIn(ctx, tx, h)
			},
			wantStatus: engine.HoldPending,
		},
		"consumed by the decision": {
			setup: func(t *testing.T, s *Store) { approve(t, s, "h"); consume(t, s, "h", "d1") },
			undo: func(s *Store, tx *sql.Tx) (bool, error) {
				return s.UndoConsumeIn(ctx, tx, engine.Consumption{HoldID: "h", DecisionID: "d1"})
			},
			wantUndone: true,
			wantStatus: engine.HoldApproved,
		},
		"consumed by another decision": {
			setup: func(t *testing.T, s *Store) { approve(t, s, "h"); consume(t, s, "h", "d2") },
			undo: func(s *Store, tx *sql.Tx) (bool, error) {
				return s.UndoConsumeIn(ctx, tx, engine.Consumption{HoldID: "h", DecisionID: "d1"})
			},
			wantStatus: engine.HoldConsumed,
		},
		"not consumed": {
			setup: func(t *testing.T, s *Store) { approve(t, s, "h") },
			undo: func(s *Store, tx *sql.Tx) (bool, error) {
				return s.UndoConsumeIn(ctx, tx, engine.Consumption{HoldID: "h", DecisionID: "d1"})
			},
			wantStatus: engine.HoldApproved,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			mustCreate(t, s, newHold("h", t0))
			if tc.setup != nil {
				tc.setup(t, s)
			}
			tx, err := s.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			undone, err := tc.undo(s, tx)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			assert.Equal(t, tc.wantUndone, undone)

			h, err := s.Get(ctx, "h", t0.Add(time.Minute))
			if tc.wantStatus == "" {
				requireErr(t, err, ErrNotFound, map[string]any{"hold_id": "h"})
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, h.Status)
			if tc.wantUndone { // re-opened: redeemable once more, by any decision
				assert.Nil(t, h.ConsumedTS)
				assert.Empty(t, h.ConsumedBy)
				consume(t, s, "h", "d3")
			}
		})
	}
}
