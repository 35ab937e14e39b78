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

// Freeze persists the kill-switch state the engine last ran with, so that a
// restart stays frozen and a start that changes the state knows it does.
type Freeze struct{ db *DB }

// NewFreeze returns the freeze store, creating its one-row table, or adding
// the pin_ms column to a table created before svc stored SVC_FREEZE's pin.
// A row written before then holds the state set through the API, which
// pin_ms NULL says.
//
// pin_ms is the updated_ms of a row svc wrote as SVC_FREEZE's pin. A row
// written since by an svc that does not know the column keeps its pin_ms
// but not its updated_ms, and so is not read as a pin: the state such an svc
// set through the API is never cleared as a pin at the next start.
func NewFreeze(ctx context.Context, db *DB) (*Freeze, error) {
	if db.pg { // its migration created the table
		return &Freeze{db: db}, nil
	}
	const ddl = `CREATE TABLE IF NOT EXISTS freeze_state (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		frozen INTEGER NOT NULL,
		reason TEXT NOT NULL,
		changed_by TEXT NOT NULL,
		updated_ms INTEGER NOT NULL,
		pin_ms INTEGER)`
	if _, err := db.SQL().ExecContext(ctx, ddl); err != nil {
		return nil, fmt.Errorf("create freeze table in %s: %w", db.Path(), err)
	}
	if err := addPinColumn(ctx, db.SQL()); err != nil {
		return nil, fmt.Errorf("add pin_ms to the freeze table in %s: %w", db.Path(), err)
	}
	return &Freeze{db: db}, nil
}

// addPinColumn adds the pin_ms column where it is missing, in a
// transaction so that two engines starting on one file add it once.
func addPinColumn(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	err = tx.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM pragma_table_info('freeze_state') WHERE name = 'pin_ms'`).Scan(&n)
	if err != nil {
		return err
	}
	if n == 0 {
		if _, err := tx.ExecContext(ctx,
			`ALTER TABLE freeze_state ADD COLUMN pin_ms INTEGER`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// LoadFreeze returns the stored state; never set means not frozen, with a
// zero UpdatedTS.
func (f *Freeze) LoadFreeze(ctx context.Context) (engine.FreezeState, error) {
	var st engine.FreezeState
	var ms int64
	fromPin := "coalesce(pin_ms = updated_ms, 0)"
	if f.db.pg {
		fromPin = "coalesce(pin_ms = updated_ms, false)"
	}
	err := f.db.db.QueryRowContext(ctx,
		`SELECT frozen, reason, changed_by, updated_ms, `+fromPin+` FROM freeze_state WHERE id = 1`).
		Scan(&st.Frozen, &st.Reason, &st.By, &ms, &st.FromPin)
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
		_, err := tx.ExecContext(ctx, `INSERT INTO freeze_state (id, frozen, reason, changed_by, updated_ms, pin_ms)
		VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET frozen = excluded.frozen,
		reason = excluded.reason, changed_by = excluded.changed_by, updated_ms = excluded.updated_ms,
		pin_ms = excluded.pin_ms`,
			st.Frozen, st.Reason, st.By, st.UpdatedTS.UnixMilli(), pinMS(st))
		if err != nil || !f.db.pg {
			return err
		}
		_, err = tx.ExecContext(ctx, `SELECT pg_notify('`+FreezeChannel+`', '')`)
		return err
	})
	if err != nil {
		return fmt.Errorf("save freeze state: %w", err)
	}
	return nil
}

// FreezeChannel is the PostgreSQL notification channel on which the commit
// of a freeze change announces it to the other replicas.
const FreezeChannel = "svc_freeze"

// pinMS is the pin_ms of st: its updated_ms if it is SVC_FREEZE's pin, else
// NULL.
func pinMS(st engine.FreezeState) sql.NullInt64 {
	return sql.NullInt64{Int64: st.UpdatedTS.UnixMilli(), Valid: st.FromPin}
}
