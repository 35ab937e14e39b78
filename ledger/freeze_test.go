package ledger_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/ledger"
)

// openFreezeDB opens the database at path, closed with the test.
func openFreezeDB(t *testing.T, path string) *ledger.DB {
	t.Helper()
	db, err := ledger.Open(context.Background(), path, ledger.DurabilityFull)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	return db
}

// TestFreezeStoresThePin: a state saved as SVC_FREEZE's pin loads as one;
// a state set through the API does not, nor a never-set state.
func TestFreezeStoresThePin(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 21, 12, 31, 33, 192613542, time.UTC)
	for _, tc := range []struct {
		name string
		save *engine.FreezeState
		want engine.FreezeState
	}{
		{"never set", nil, engine.FreezeState{}},
		{"pin", &engine.FreezeState{Frozen: true, Reason: "pinned", By: "config:SVC_FREEZE", UpdatedTS: at, FromPin: true},
			engine.FreezeState{Frozen: true, Reason: "pinned", By: "config:SVC_FREEZE", UpdatedTS: at.Truncate(time.Millisecond), FromPin: true}},
		{"API freeze", &engine.FreezeState{Frozen: true, Reason: "incident", By: "human:bob", UpdatedTS: at},
			engine.FreezeState{Frozen: true, Reason: "incident", By: "human:bob", UpdatedTS: at.Truncate(time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "svc.db")
			f, err := ledger.NewFreeze(ctx, openFreezeDB(t, path))
			require.NoError(t, err)
			if tc.save != nil {
				require.NoError(t, f.SaveFreeze(ctx, *tc.save))
			}
			again, err := ledger.NewFreeze(ctx, openFreezeDB(t, path))
			require.NoError(t, err)
			got, err := again.LoadFreeze(ctx)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestFreezeTableWithoutPinColumn: a freeze table written by an svc that did
// not store the pin gains the column, its row reading as a state set through
// the API; and a pin row that such an svc rewrote since (leaving pin_ms
// alone) is not read as a pin.
func TestFreezeTableWithoutPinColumn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "svc.db")
	db := openFreezeDB(t, path)
	_, err := db.SQL().ExecContext(ctx, `CREATE TABLE freeze_state (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		frozen INTEGER NOT NULL,
		reason TEXT NOT NULL,
		changed_by TEXT NOT NULL,
		updated_ms INTEGER NOT NULL)`)
	require.NoError(t, err)
	_, err = db.SQL().ExecContext(ctx, `INSERT INTO freeze_state VALUES (1, 1, 'incident', 'human:bob', 1000)`)
	require.NoError(t, err)

	f, err := ledger.NewFreeze(ctx, db)
	require.NoError(t, err)
	got, err := f.LoadFreeze(ctx)
	require.NoError(t, err)
	assert.Equal(t, engine.FreezeState{Frozen: true, Reason: "incident", By: "human:bob",
		UpdatedTS: time.UnixMilli(1000).UTC()}, got)
	_, err = ledger.NewFreeze(ctx, db)
	require.NoError(t, err, "adding the column twice is a no-op")

	require.NoError(t, f.SaveFreeze(ctx, engine.FreezeState{Frozen: true, Reason: "pinned",
		By: "config:SVC_FREEZE", UpdatedTS: time.UnixMilli(2000), FromPin: true}))
	_, err = db.SQL().ExecContext(ctx, `UPDATE freeze_state SET frozen = 1, reason = 'incident',
		changed_by = 'human:bob', updated_ms = 3000 WHERE id = 1`) // as the older svc's API writes it
	require.NoError(t, err)
	got, err = f.LoadFreeze(ctx)
	require.NoError(t, err)
	assert.False(t, got.FromPin, "the older svc's API freeze is not the pin's to clear")
	assert.True(t, got.Frozen)
}
