package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/svc-dev/svc/engine"
)

// commit writes batch to the JSONL file and to the mirror, the two at once:
// the file's fsync and the mirror's commit overlap, so a decision waits for
// one disk flush rather than two in a row. The hold writes of the batch
// are made first, in its transaction, and an entry whose hold write the
// store refuses is left out of the batch. If either write fails the other is undone (the
// lines truncated away; the mirror rows and charges deleted, the holds the
// batch created removed, those it consumed re-opened and those it resolved
// pending again), so that an error
// means neither copy holds the batch, short of a crash in between or a
// failed undo, which is logged: a charge that stays then only tightens a
// budget (see docs/holds.md for holds), and lines that stay are voided
// (void).
func (a *Audit) commit(ctx context.Context, batch []*entry) error {
	var file <-chan appended
	var written []*entry
	rows, mirrorErr := a.mirror(ctx, batch, func(live []*entry) <-chan appended {
		written, file = live, a.appendAsync(live)
		return file
	})
	if file == nil {
		return mirrorErr
	}
	f := <-file
	switch {
	case f.err == nil && mirrorErr == nil:
		return nil
	case f.err == nil:
		if err := a.file.rollback(f.size); err != nil {
			a.void(written, err)
		}
		return mirrorErr
	case errors.Is(f.err, errLinesKept):
		a.void(written, f.err)
	}
	if mirrorErr == nil {
		a.undo(ctx, rows)
	}
	return errors.Join(f.err, mirrorErr)
}

// crashBeforeCommit is nil but in builds with the svcfault tag, where the
// crash tests set it (fault_crash.go): it runs in a batch's transaction
// just before its commit, given the batch's entries and the outcome of
// their file append, and either returns without reading file or ends the
// process, so that a test can kill svc between the two writes of a batch.
var crashBeforeCommit func(batch []*entry, file <-chan appended)

// appended is the outcome of a JSONL append: the file's size before it, or
// why it failed.
type appended struct {
	size int64
	err  error
}

// appendAsync appends the lines of batch to the JSONL file in the
// background; it returns nil when there is no file or no line.
func (a *Audit) appendAsync(batch []*entry) <-chan appended {
	if a.file == nil || len(batch) == 0 {
		return nil
	}
	buf := joinLines(batch)
	done := make(chan appended, 1)
	go func() {
		size, err := a.file.append(buf)
		a.appendErr.Store(&err)
		done <- appended{size, err}
	}()
	return done
}

// updateChargeCache brings the charge cache up to date with a batch: the charges
// it stored are added, and after a failure its sessions are dropped (the
// commit may have been undone, or not).
func (a *Audit) updateChargeCache(batch []*entry, err error) {
	var stored []engine.Charge
	var sessions []string
	for _, e := range batch {
		switch {
		case e.charge == nil:
		case err != nil:
			sessions = append(sessions, chargeKeys(*e.charge)...)
		case e.err == nil:
			stored = append(stored, *e.charge)
		}
	}
	a.db.charges.add(stored)
	a.db.charges.forget(sessions)
}

// mirrored is what a batch's mirror transaction wrote: the ids of the rows
// it inserted and its hold writes.
type mirrored struct {
	audit, charges []int64
	created        []engine.Hold
	consumed       []engine.Consumption
	resolved       []engine.HoldResolution
}

// mirror makes the batch's hold writes, calls started with the entries
// that remain (which starts their file append), then inserts their audit
// rows and charges, all in one transaction, and returns what it wrote.
func (a *Audit) mirror(ctx context.Context, batch []*entry, started func(live []*entry) <-chan appended) (mirrored, error) {
	var rows mirrored
	err := a.db.write(ctx, func(tx *sql.Tx) error {
		live, err := a.holdWrites(ctx, tx, batch, &rows)
		if err != nil {
			return err
		}
		file := started(live)
		insert, charge := tx.StmtContext(ctx, a.insert), tx.StmtContext(ctx, a.charge)
		for _, e := range live {
			if err := a.insertEntry(ctx, insert, charge, e, &rows); err != nil {
				return err
			}
		}
		if crashBeforeCommit != nil {
			crashBeforeCommit(live, file)
		}
		return nil
	})
	if err != nil {
		return mirrored{}, fmt.Errorf("mirror audit batch: %w", err)
	}
	return rows, nil
}

// holdWrites makes the hold writes of batch (the compare-and-set of a
// consumption or a resolution, the row of a new hold), adding those made to rows, and
// returns the entries whose write did not fail, those without one included.
// A write the hold store refuses for its own reasons (an *engine.Error: the
// hold moved on, is unknown, exists, or is invalid) is one failed statement,
// which changes nothing: it fails its entry alone, which is left out of the
// batch. Any other error fails the batch.
func (a *Audit) holdWrites(ctx context.Context, tx *sql.Tx, batch []*entry, rows *mirrored) ([]*entry, error) {
	live := make([]*entry, 0, len(batch))
	for _, e := range batch {
		err := a.holdWrite(ctx, tx, e, rows)
		var refused *engine.Error
		switch {
		case errors.As(err, &refused):
			e.err = err
			continue
		case err != nil:
			return nil, err
		}
		live = append(live, e)
	}
	return live, nil
}

// holdWrite makes e's hold write, if any (Commit allows one at most).
func (a *Audit) holdWrite(ctx context.Context, tx *sql.Tx, e *entry, rows *mirrored) error {
	switch {
	case e.consume != nil:
		if err := a.holds.ConsumeIn(ctx, tx, *e.consume); err != nil {
			return err
		}
		rows.consumed = append(rows.consumed, *e.consume)
	case e.create != nil:
		if err := a.holds.CreateIn(ctx, tx, *e.create); err != nil {
			return err
		}
		rows.created = append(rows.created, *e.create)
	case e.resolve != nil:
		if err := a.holds.ResolveIn(ctx, tx, *e.resolve); err != nil {
			return err
		}
		rows.resolved = append(rows.resolved, *e.resolve)
	}
	return nil
}

// insertEntry writes one entry's audit rows and charge, adding their ids to
// rows.
func (a *Audit) insertEntry(ctx context.Context, insert, charge *sql.Stmt, e *entry, rows *mirrored) error {
	for _, l := range e.lines {
		seq, err := a.db.insertID(ctx, insert, lineArgs(l)...)
		if err != nil {
			return err
		}
		rows.audit = append(rows.audit, seq)
	}
	if e.charge == nil {
		return nil
	}
	id, err := a.db.insertID(ctx, charge, chargeArgs(*e.charge)...)
	if err != nil {
		return fmt.Errorf("charge session %q decision %q: %w", e.charge.SessionID, e.charge.DecisionID, err)
	}
	rows.charges = append(rows.charges, id)
	return nil
}

// lineArgs are the arguments of the audit insert statement for l.
func lineArgs(l line) []any {
	id := sql.NullString{String: l.decisionID, Valid: l.decisionID != ""}
	return []any{l.tsMS, l.kind, id, string(l.body)}
}

// undo deletes the mirror rows and charges of a batch whose lines could
// not be written, removes the holds it created, re-opens those it consumed
// and returns those it resolved to pending. A hold that has moved on since is left as it is, and logged.
func (a *Audit) undo(ctx context.Context, rows mirrored) {
	err := a.db.write(ctx, func(tx *sql.Tx) error {
		for _, q := range []struct {
			table, key string
			ids        []int64
		}{{"audit", "seq", rows.audit}, {"charges", "id", rows.charges}} {
			for _, id := range q.ids {
				if _, err := tx.ExecContext(ctx, "DELETE FROM "+q.table+" WHERE "+q.key+" = ?", id); err != nil {
					return err
				}
			}
		}
		return a.undoHolds(ctx, tx, rows)
	})
	if err != nil {
		a.log.Error().Err(err).Int("records", len(rows.audit)).Int("charges", len(rows.charges)).
			Int("holds", len(rows.created)+len(rows.consumed)+len(rows.resolved)).
			Msg("audit mirror: cannot undo the writes of a batch whose lines failed; they are not acknowledged")
	}
}

// undoHolds reverts the hold writes of rows in tx.
func (a *Audit) undoHolds(ctx context.Context, tx *sql.Tx, rows mirrored) error {
	for _, h := range rows.created {
		undone, err := a.holds.UndoCreateIn(ctx, tx, h)
		if err != nil {
			return err
		}
		if !undone {
			a.log.Warn().Str("hold_id", h.ID).Msg("audit mirror: a hold created by a batch whose lines failed is no longer pending; left as it is")
		}
	}
	for _, c := range rows.consumed {
		undone, err := a.holds.UndoConsumeIn(ctx, tx, c)
		if err != nil {
			return err
		}
		if !undone {
			a.log.Warn().Str("hold_id", c.HoldID).Msg("audit mirror: a hold consumed by a batch whose lines failed changed since; left as it is")
		}
	}
	for _, r := range rows.resolved {
		undone, err := a.holds.UndoResolveIn(ctx, tx, r)
		if err != nil {
			return err
		}
		if !undone {
			a.log.Warn().Str("hold_id", r.HoldID).Msg("audit mirror: a hold resolved by a batch whose lines failed changed since; left as it is")
		}
	}
	return nil
}
