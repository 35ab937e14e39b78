package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine"
)

var _ engine.FreezeStore = (*Freeze)(nil)

// Freeze persists the kill-switch state, so that a restart stays frozen.
type Freeze struct{ db *DB }

// NewFreeze returns the freeze store, creating its one-row table.
func NewFreeze(ctx context.Context, db *DB) (*Freeze, error) {
	const ddl = `CREATE TABLE IF NOT EXISTS freeze_state (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		frozen INTEGER NOT NULL,
		reason TEXT NOT NULL,
		changed_by TEXT NOT NULL,
		updated_ms INTEGER NOT NULL)`
	if _, err := db.SQL().ExecContext(ctx, ddl); err != nil {
		return nil, fmt.Errorf("create freeze table in %s: %w", db.Path(), err)
	}
	return &Freeze{db: db}, nil
}

// LoadFreeze returns the stored state; never set means not frozen.
func (f *Freeze) LoadFreeze(ctx context.Context) (engine.FreezeState, error) {
	var st engine.FreezeState
	var ms int64
	err := f.db.db.QueryRowContext(ctx,
		`SELECT frozen, reason, changed_by, updated_ms FROM freeze_state WHERE id = 1`).
		Scan(&st.Frozen, &st.Reason, &st.By, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return engine.FreezeState{}, nil
	}
	if err != nil {
		return engine.FreezeState{}, fmt.Errorf("load freeze state: %w", err)
	}
	st.UpdatedTS = time.UnixMilli(ms).UTC()
	return st, nil
}

// SaveFreeze stores the state. It fails, storing nothing, when the
// database file was removed or replaced while svc ran: the state would be
// lost at the next start.
func (f *Freeze) SaveFreeze(ctx context.Context, st engine.FreezeState) error {
	err := f.db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO freeze_state (id, frozen, reason, changed_by, updated_ms)
		VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET frozen = excluded.frozen,
		reason = excluded.reason, changed_by = excluded.changed_by, updated_ms = excluded.updated_ms`,
			st.Frozen, st.Reason, st.By, st.UpdatedTS.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("save freeze state: %w", err)
	}
	return nil
}
