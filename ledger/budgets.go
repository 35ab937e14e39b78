package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/svc-dev/svc/engine"
)

var _ engine.Budgets = (*Budgets)(nil)

// Budgets reads the per-session ledger of charges. Each charge is its own row,
// so a session's totals over any window are a sum over an index range and
// the rolling window needs no bucket maintenance; Prune bounds the table.
// The charges of recently used sessions are also kept in memory (see
// chargeCache), so most reads do not query SQLite.
type Budgets struct {
	db                                *DB
	sessionCharges, sessionSum, prune *sql.Stmt
}

// insertCharge stores one charge. Charges are written only by
// Audit.Commit, with the decision record they belong to.
const insertCharge = `INSERT INTO charges (session_id, decision_id, at_ms, deletes, external_sends, objects)
	VALUES (?, ?, ?, ?, ?, ?)`

// NewBudgets prepares the ledger's statements on db; db.Close releases them.
func NewBudgets(ctx context.Context, db *DB) (*Budgets, error) {
	b := Budgets{db: db}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&b.sessionCharges, `SELECT at_ms, deletes, external_sends, objects
			FROM charges WHERE session_id = ? AND at_ms >= ? ORDER BY at_ms, id LIMIT ` + strconv.Itoa(cacheCharges+1)},
		{&b.sessionSum, `SELECT COALESCE(SUM(deletes), 0), COALESCE(SUM(external_sends), 0), COALESCE(SUM(objects), 0)
			FROM charges WHERE session_id = ? AND at_ms >= ?`},
		{&b.prune, `DELETE FROM charges WHERE at_ms < ?`},
	} {
		stmt, err := db.prepare(ctx, p.query)
		if err != nil {
			return nil, fmt.Errorf("new budgets: %w", err)
		}
		*p.stmt = stmt
	}
	return &b, nil
}

// Totals sums the charges of sessionID made at or after since: from the
// cache, else from SQLite, caching the session's charges when there are few
// enough to keep (cacheCharges); a session with more is summed by SQLite.
func (b *Budgets) Totals(ctx context.Context, sessionID string, since time.Time) (engine.Totals, error) {
	sinceMS := since.UnixMilli()
	if t, ok := b.db.charges.totals(sessionID, sinceMS); ok {
		return t, nil
	}
	charges, err := b.charges(ctx, sessionID, sinceMS)
	if err != nil {
		return engine.Totals{}, fmt.Errorf("budget totals of session %q: %w", sessionID, err)
	}
	if len(charges) > cacheCharges {
		var t engine.Totals
		err := b.sessionSum.QueryRowContext(ctx, sessionID, sinceMS).Scan(&t.Deletes, &t.ExternalSends, &t.Objects)
		if err != nil {
			return engine.Totals{}, fmt.Errorf("budget totals of session %q: %w", sessionID, err)
		}
		return t, nil
	}
	b.db.charges.load(sessionID, sinceMS, charges)
	return sumCharges(charges), nil
}

// charges reads the session's charges at or after sinceMS, oldest first,
// up to one more than the cache keeps.
func (b *Budgets) charges(ctx context.Context, sessionID string, sinceMS int64) ([]cachedCharge, error) {
	rows, err := b.sessionCharges.QueryContext(ctx, sessionID, sinceMS)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []cachedCharge
	for rows.Next() {
		var c cachedCharge
		if err := rows.Scan(&c.atMS, &c.Deletes, &c.ExternalSends, &c.Objects); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// execCharge runs insertCharge for c.
func execCharge(ctx context.Context, insert *sql.Stmt, c engine.Charge) (sql.Result, error) {
	return insert.ExecContext(ctx, c.SessionID, c.DecisionID, c.At.UnixMilli(), c.Deletes, c.ExternalSends, c.Objects)
}

func validCharge(c engine.Charge) error {
	switch {
	case c.SessionID == "":
		return errors.New("empty session id")
	case c.At.IsZero():
		return errors.New("zero charge time")
	case c.Deletes < 0 || c.ExternalSends < 0 || c.Objects < 0:
		return fmt.Errorf("negative charge %+v", c.Totals)
	}
	return nil
}

// Prune deletes the charges made before before and returns how many it
// deleted. Call it periodically with now minus the longest budget window.
func (b *Budgets) Prune(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := b.db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, b.prune).ExecContext(ctx, before.UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	b.db.charges.clear() // cached charges older than before must go too
	if err != nil {
		return 0, fmt.Errorf("prune charges before %s: %w", before.Format(time.RFC3339), err)
	}
	return n, nil
}
