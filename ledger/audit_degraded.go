package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine"
)

// KindVoided is the kind of the record that voids a line left in the JSONL
// file by a batch that was not committed (see voided, and reconcile for
// the lines a crash leaves).
const KindVoided = "voided"

// salvageTimeout bounds the mirror write of RecordDegraded when its context
// sets no earlier deadline.
const salvageTimeout = 2 * time.Second

// voidReason is the reason a voided record gives.
const voidReason = "batch not committed; the record did not take effect and its decision was answered deny"

// errNoSink is the error of a degraded record that neither the file nor
// the mirror took.
var errNoSink = errors.New("no audit sink took the record")

// RecordDegraded records, best effort, what a failed Commit could not: the
// fail-closed deny the engine answers instead. It writes the record to the
// JSONL file alone (synced as the Durability says) and, separately, to the
// mirror alone, so that it reaches whichever of the two still works, and
// succeeds if either stored it; each failure is logged. It writes no charge
// or hold, and waits for the mirror no longer than ctx's deadline or
// salvageTimeout, whichever comes first. The record queues behind the batch
// in progress, which may itself wait for a lock; RecordDegraded returns at
// ctx's deadline all the same, leaving the record queued: it is written
// when its batch comes.
func (a *Audit) RecordDegraded(ctx context.Context, kind string, record any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("record degraded audit %s: %w", kind, err)
	}
	l, err := a.line(engine.AuditRecord{Kind: kind, Body: record})
	if err != nil {
		return fmt.Errorf("record degraded audit %s: %w", kind, err)
	}
	e := &entry{lines: []line{l}, degraded: true, done: make(chan signal, 1)}
	e.deadline, _ = ctx.Deadline()
	// submit waits for the batch in progress whatever ctx says (a follower
	// may be handed the lead), so it runs on its own and is awaited only
	// until ctx ends.
	submitted := make(chan error, 1)
	go func() { submitted <- a.submit(context.WithoutCancel(ctx), e) }()
	select {
	case err = <-submitted:
	case <-ctx.Done():
		err = awaitGrace(submitted, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("record degraded audit %s: %w", kind, err)
	}
	return nil
}

// degradedGrace is how long RecordDegraded still waits for its outcome
// after its deadline: the mirror write gives up at that same deadline, and
// its answer (the file may have taken the record) follows a moment later.
const degradedGrace = 100 * time.Millisecond

// awaitGrace returns the outcome of submitted if it comes within
// degradedGrace, else late, noting that the record stays queued.
func awaitGrace(submitted <-chan error, late error) error {
	t := time.NewTimer(degradedGrace)
	defer t.Stop()
	select {
	case err := <-submitted:
		return err
	case <-t.C:
		return fmt.Errorf("%w; the record stays queued", late)
	}
}

// salvage stores the lines of the degraded entries of a batch in each sink
// on its own, one file append and one mirror transaction for all, and
// answers them.
func (a *Audit) salvage(ctx context.Context, batch []*entry) {
	ctx, cancel := context.WithDeadline(ctx, salvageDeadline(batch))
	defer cancel()
	fileErr := a.salvageFile(batch)
	mirrorErr := a.salvageMirror(ctx, batch)
	a.noteFileGone(mirrorErr)
	var err error
	if (a.file == nil || fileErr != nil) && mirrorErr != nil {
		err = fmt.Errorf("%w: %w", errNoSink, errors.Join(fileErr, mirrorErr))
	}
	for _, e := range batch {
		e.done <- signal{err: err}
	}
}

// salvageDeadline is the earliest deadline of the entries, at most
// salvageTimeout from now.
func salvageDeadline(batch []*entry) time.Time {
	d := time.Now().Add(salvageTimeout)
	for _, e := range batch {
		if !e.deadline.IsZero() && e.deadline.Before(d) {
			d = e.deadline
		}
	}
	return d
}

// salvageFile appends the lines of batch to the JSONL file alone.
//
// It writes even after a flush has failed under DurabilityOS (flushErr),
// which refuses every regular batch: a degraded record is always a deny,
// and a line that may not reach the disk is still better than none.
func (a *Audit) salvageFile(batch []*entry) error {
	if a.file == nil {
		return nil
	}
	if _, err := a.file.append(joinLines(batch)); err != nil {
		a.logLimit.Event("salvage file", a.log.Error()).Err(err).Strs("decision_ids", decisionIDs(batch)).
			Msg("audit log: a degraded record could not be written to the file")
		return err
	}
	return nil
}

// salvageMirror inserts the rows of batch in the mirror alone.
func (a *Audit) salvageMirror(ctx context.Context, batch []*entry) error {
	err := a.db.writeWithin(ctx, func(tx *sql.Tx) error {
		insert := tx.StmtContext(ctx, a.insert)
		for _, e := range batch {
			for _, l := range e.lines {
				if _, err := a.db.insertID(ctx, insert, lineArgs(l)...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		a.logLimit.Event("salvage mirror", a.log.Error()).Err(err).Strs("decision_ids", decisionIDs(batch)).
			Msg("audit mirror: a degraded record could not be written")
		return fmt.Errorf("mirror degraded audit records: %w", err)
	}
	return nil
}

// voided is the record that voids one line of a batch that was not
// committed but whose lines could not be removed from the file (an
// append-only file refuses truncation), or that a crash left in the file
// before its batch committed (reconcile): the line stays, followed by this
// record naming it.
type voided struct {
	TS          string `json:"ts"`
	Event       string `json:"event"`
	VoidedEvent string `json:"voided_event"`
	DecisionID  string `json:"decision_id,omitempty"`
	LineSHA256  string `json:"line_sha256"`
	Reason      string `json:"reason"`
}

// void appends, and syncs to disk, a voided record for each line of batch,
// which cause kept in the file. If that fails too it logs: the lines stay
// as if acknowledged.
func (a *Audit) void(batch []*entry, cause error) {
	ts := nowStamp(a.db)
	var buf bytes.Buffer
	for _, e := range batch {
		for _, l := range e.lines {
			buf.Write(voidedLine(ts, l.kind, l.decisionID, l.body, voidReason))
		}
	}
	if _, err := a.file.write(buf.Bytes(), true); err != nil {
		a.log.Error().Err(err).AnErr("cause", cause).Strs("decision_ids", decisionIDs(batch)).
			Msg("audit log: cannot void the lines of a failed batch; they stay in the file though not acknowledged")
		return
	}
	a.log.Warn().Err(cause).Strs("decision_ids", decisionIDs(batch)).
		Msg("audit log: the lines of a failed batch stay in the file; voided records follow them")
}

// voidedLine is the voided record, with its newline, of the line body
// (without its newline) of kind and decision id, for reason.
func voidedLine(ts, kind, decisionID string, body []byte, reason string) []byte {
	sum := sha256.Sum256(body)
	// A struct of strings always marshals.
	out, _ := json.Marshal(voided{TS: ts, Event: KindVoided, VoidedEvent: kind,
		DecisionID: decisionID, LineSHA256: hex.EncodeToString(sum[:]), Reason: reason})
	return append(out, '\n')
}

// nowStamp is the time of db's clock as records write it.
func nowStamp(db *DB) string { return engine.FormatTime(db.Now()) }

// joinLines is the lines of batch, each ended by a newline.
func joinLines(batch []*entry) []byte {
	var buf bytes.Buffer
	for _, e := range batch {
		for _, l := range e.lines {
			buf.Write(l.body)
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// decisionIDs lists the decision ids of the lines of batch, for logs.
func decisionIDs(batch []*entry) []string {
	var ids []string
	for _, e := range batch {
		for _, l := range e.lines {
			if l.decisionID != "" {
				ids = append(ids, l.decisionID)
			}
		}
	}
	return ids
}

// noteFileGone logs, once, that the database file was removed or replaced
// while svc runs: from then on every commit fails, so every decision is
// denied, until the file is restored and svc restarted.
func (a *Audit) noteFileGone(err error) {
	if a.fileGone || !errors.Is(err, errFileGone) {
		return
	}
	a.fileGone = true
	a.log.Error().Err(err).Str("path", a.db.Path()).
		Msg("ledger database removed or replaced while svc runs: every decision is denied until svc is restarted")
}
