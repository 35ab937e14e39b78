package holds

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine"
)

// ResolveIn moves a pending, unexpired hold to r.Status in one
// compare-and-set, in tx, the transaction that records the resolution: of
// any number of concurrent callers one at most succeeds, and a loser
// changes nothing. It checks no authority: that is the Service's job. An
// unknown id is ErrNotFound; a hold in any other state (expired included)
// is ErrNotResolvable (an engine.ErrConflict) carrying its status as of
// r.At.
//
// On PostgreSQL the commit of tx also notifies the other replicas
// (HoldsChannel), so their long-polls of the hold wake.
func (s *Store) ResolveIn(ctx context.Context, tx *sql.Tx, r engine.HoldResolution) error {
	if err := resolve(ctx, tx, r); err != nil {
		return err
	}
	if !s.pg {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify('`+HoldsChannel+`', ?)`, r.HoldID); err != nil {
		return fmt.Errorf("resolve hold %s: notify: %w", r.HoldID, err)
	}
	return nil
}

// HoldsChannel is the PostgreSQL notification channel on which the commit
// of a resolution announces its hold's id.
const HoldsChannel = "svc_holds"

// resolve is ResolveIn on q. It reads the hold only when the
// compare-and-set fails, to tell an unknown hold from one that moved on.
func resolve(ctx context.Context, q querier, r engine.HoldResolution) error {
	id := r.HoldID
	if r.Status != engine.HoldApproved && r.Status != engine.HoldRejected {
		return fmt.Errorf("resolve hold %s: %w", id,
			engine.InvalidField("decision", "a resolution approves or rejects"))
	}
	ms := r.At.UnixMilli()
	changed, err := updateOne(ctx, q, `UPDATE holds SET status = ?, decided_by_type = ?,
		decided_by_id = ?, decided_ms = ?, decided_verified = ?, resolution_reason = ?
		WHERE id = ? AND status = 'pending' AND expires_ms > ?`,
		r.Status, r.By.Type, r.By.ID, ms, r.Verified, r.Reason, id, ms)
	switch {
	case err != nil:
		return fmt.Errorf("resolve hold %s: %w", id, err)
	case changed:
		return nil
	}
	cur, err := get(ctx, q, id, r.At)
	if err != nil {
		return fmt.Errorf("resolve hold: %w", err)
	}
	return fmt.Errorf("resolve hold %s: %w", id,
		notResolvable(id, cur.Status, "hold is "+cur.Status+", only a pending hold can be resolved"))
}

// UndoResolveIn returns to pending, in tx, a hold that ResolveIn resolved
// with r when the audit line of that resolution could not be written after
// all: no unaudited approval stands. It reports false, changing nothing,
// when the hold is no longer as r left it (consumed or expired since).
func (s *Store) UndoResolveIn(ctx context.Context, tx *sql.Tx, r engine.HoldResolution) (bool, error) {
	undone, err := updateOne(ctx, tx, `UPDATE holds SET status = 'pending', decided_by_type = NULL,
		decided_by_id = NULL, decided_ms = NULL, decided_verified = NULL, resolution_reason = ''
		WHERE id = ? AND status = ? AND decided_by_type = ? AND decided_by_id = ? AND decided_ms = ?
		AND consumed_ms IS NULL`,
		r.HoldID, r.Status, r.By.Type, r.By.ID, r.At.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("return hold %s to pending: %w", r.HoldID, err)
	}
	return undone, nil
}

// UndoCreateIn removes, in tx, hold h that CreateIn wrote for a decision
// whose audit line could not be written after all, provided it is still
// pending; it reports false, changing nothing, when the hold has moved on.
func (s *Store) UndoCreateIn(ctx context.Context, tx *sql.Tx, h engine.Hold) (bool, error) {
	undone, err := updateOne(ctx, tx, `DELETE FROM holds WHERE id = ? AND status = 'pending' AND decision_id = ?`,
		h.ID, h.DecisionID)
	if err != nil {
		return false, fmt.Errorf("remove hold %s: %w", h.ID, err)
	}
	return undone, nil
}

// UndoConsumeIn re-opens, in tx, a hold that ConsumeIn consumed for the
// decision c.DecisionID when that decision's audit line could not be
// written after all: the re-submission was answered deny, so the approval
// still stands for one allow. It reports false, changing nothing, when the
// hold is no longer consumed by that decision.
func (s *Store) UndoConsumeIn(ctx context.Context, tx *sql.Tx, c engine.Consumption) (bool, error) {
	undone, err := updateOne(ctx, tx, `UPDATE holds SET status = 'approved', consumed_ms = NULL,
		consumed_by_decision_id = NULL WHERE id = ? AND status = 'consumed' AND consumed_by_decision_id = ?`,
		c.HoldID, c.DecisionID)
	if err != nil {
		return false, fmt.Errorf("re-open hold %s: %w", c.HoldID, err)
	}
	return undone, nil
}

// updateOne runs a statement that writes at most one hold row (a
// compare-and-set, or the undo of one) and reports whether it changed it.
func updateOne(ctx context.Context, q querier, stmt string, args ...any) (bool, error) {
	r, err := q.ExecContext(ctx, stmt, args...)
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ConsumeIn redeems an approved, unexpired, unconsumed hold for the
// decision c.DecisionID in one compare-and-set, in tx, the transaction that
// records that decision: of any number of concurrent callers exactly one
// succeeds, and a loser changes nothing. An unknown id is ErrNotFound; any
// other state is ErrNotRedeemable (an engine.ErrConflict) carrying the
// status as of c.At.
func (s *Store) ConsumeIn(ctx context.Context, tx *sql.Tx, c engine.Consumption) error {
	return consume(ctx, tx, c)
}

// consume is ConsumeIn on q. It reads the hold only when the
// compare-and-set fails, to tell an unknown hold from one that moved on.
func consume(ctx context.Context, q querier, c engine.Consumption) error {
	id := c.HoldID
	if c.DecisionID == "" {
		return fmt.Errorf("consume hold %s: %w", id,
			engine.InvalidField("decision_id", "a consumption names the decision that redeems the hold"))
	}
	ms := c.At.UnixMilli()
	changed, err := updateOne(ctx, q, `UPDATE holds SET status = 'consumed', consumed_ms = ?,
		consumed_by_decision_id = ? WHERE id = ? AND status = 'approved' AND expires_ms > ?
		AND consumed_ms IS NULL`, ms, c.DecisionID, id, ms)
	switch {
	case err != nil:
		return fmt.Errorf("consume hold %s: %w", id, err)
	case changed:
		return nil
	}
	cur, err := get(ctx, q, id, c.At)
	if err != nil {
		return fmt.Errorf("consume hold: %w", err)
	}
	return fmt.Errorf("consume hold %s: %w", id, notRedeemable(id, cur.Status))
}

// Sweep records the expiry of every pending or approved hold whose
// expires_ts has been reached by now and returns those holds, oldest
// first. Sweeping again returns nothing new.
func (s *Store) Sweep(ctx context.Context, now time.Time) ([]engine.Hold, error) {
	hs, err := queryHolds(ctx, s.db, now, `UPDATE holds SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND expires_ms <= ? RETURNING `+holdColumns,
		now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sweep holds: %w", err)
	}
	sortHolds(hs)
	return hs, nil
}
