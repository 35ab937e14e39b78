package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/database"
	"github.com/svc-dev/svc/engine"
)

var _ engine.Journal = (*Audit)(nil)

// errClosed is returned by Record after Close.
var errClosed = errors.New("audit log closed")

// Audit is the audit log: one JSON line per record in an append-only file
// (when a path is configured) and a mirror row in SQLite. Record returns
// only once its record is stored in both, as the DB's Durability defines
// stored; the two writes of a batch succeed or fail together.
//
// Concurrent Records are group-committed, leader/follower style: the caller
// that finds no commit in progress becomes the leader and commits everything
// queued (one write, one fsync under DurabilityFull, one transaction);
// callers arriving meanwhile queue and wait, and the oldest of them leads the
// next batch. A lone caller commits at once; there is no commit timer. Commit puts all the records of
// a decision, its budget charge and its hold write in one batch, so a
// decision costs the decision path one batch (audit_commit.go).
//
// Under DurabilityOS a batch is written without being flushed to disk, and
// a background loop syncs the file and the write-ahead log every
// FlushInterval, beside the batches, none of which waits for it
// (audit_flush.go).
//
// Each batch checks that the file and the database are still the ones at
// their paths: a file removed or rotated away is re-created at its path
// (jsonl.current), a database removed or replaced fails the batch
// (DB.checkFile). When a batch fails, RecordDegraded puts the engine's
// fail-closed deny in whichever of the two still works, and lines of the
// batch that cannot be truncated away are voided (audit_degraded.go).
type Audit struct {
	db     *DB
	insert *sql.Stmt
	charge *sql.Stmt
	file   *jsonl   // nil when no audit path is configured
	holds  HoldRows // nil when commits carry no hold writes
	log    zerolog.Logger
	// logLimit rate-limits the lines of failures that recur with every
	// batch while a fault lasts (a full disk).
	logLimit *engine.LogLimiter

	// flushErr is the error of the first failed flush under DurabilityOS;
	// once it is set, every batch is refused (flush).
	flushErr atomic.Pointer[error]
	// fileGone is set once the removal of the database file has been
	// logged (noteFileGone). Only the leader touches it.
	fileGone bool
	// appendErr is the error of the last append to the file, nil once one
	// succeeds (Writable).
	appendErr atomic.Pointer[error]
	stop      chan struct{} // closed by Close to end the flush loop
	stopped   chan struct{} // closed when the flush loop has ended
	// stopCheckpoints ends the background checkpoints of a SQLite
	// database (database.Checkpoint); nil on PostgreSQL.
	stopCheckpoints func()

	mu      sync.Mutex
	idle    sync.Cond // signalled when leading becomes false
	queue   []*entry
	leading bool
	closed  bool
}

// HoldRows writes hold rows in the transaction of an audit batch, so that a
// hold transition is stored with its record; the hold store implements it.
// ConsumeIn is a compare-and-set that fails with engine.ErrConflict when
// the hold is no longer approved and unexpired, ResolveIn one that fails
// with engine.ErrConflict when it is no longer pending and unexpired. A
// write refused with an *engine.Error (conflict, unknown or existing hold,
// invalid hold or resolution) must change nothing: it fails only the entry
// that asked for it. The Undo methods revert a committed write when the
// batch's lines could not be written, reporting false (and changing
// nothing) when the hold has moved on since.
type HoldRows interface {
	CreateIn(ctx context.Context, tx *sql.Tx, h engine.Hold) error
	ConsumeIn(ctx context.Context, tx *sql.Tx, c engine.Consumption) error
	ResolveIn(ctx context.Context, tx *sql.Tx, r engine.HoldResolution) error
	UndoCreateIn(ctx context.Context, tx *sql.Tx, h engine.Hold) (bool, error)
	UndoConsumeIn(ctx context.Context, tx *sql.Tx, c engine.Consumption) (bool, error)
	UndoResolveIn(ctx context.Context, tx *sql.Tx, r engine.HoldResolution) (bool, error)
}

// entry is one caller's records, charge and hold write, waiting for their
// batch.
type entry struct {
	lines    []line
	charge   *engine.Charge         // nil when there is none
	create   *engine.Hold           // nil when there is none
	consume  *engine.Consumption    // nil when there is none
	resolve  *engine.HoldResolution // nil when there is none
	err      error                  // its hold write failed (holdWrites); it is not in the batch
	flush    bool                   // a flush request, without records (Reopen)
	reopen   bool                   // with flush: reopen the file at its path (Reopen)
	degraded bool                   // a RecordDegraded: its lines go to each sink on its own (salvage)
	deadline time.Time              // of a degraded entry's mirror write; zero when its caller set none
	done     chan signal            // receives lead (at most once), then the result
}

// line is one record, marshalled.
type line struct {
	kind       string
	decisionID string
	tsMS       int64
	body       []byte // the JSON record, without newline
}

// signal tells a waiting caller either to lead the next batch or the result
// of the batch that held its record.
type signal struct {
	lead bool
	err  error
}

// NewAudit returns the audit log on db, appending to the JSONL file at path
// when path is not empty and writing the hold rows of commits through holds
// (nil when no commit carries any), with db's Durability. The lines a crash
// left in the file without committing their batch are voided first
// (reconcile); failing that fails construction. A file that cannot
// be opened does not fail construction: the error is logged, every Record
// fails (so the engine denies) and retries the open until it succeeds.
//
// On a SQLite database the Audit also checkpoints the write-ahead log in the
// background (every database.CheckpointInterval), since no commit does
// (database.SQLite).
func NewAudit(ctx context.Context, db *DB, path string, holds HoldRows, log zerolog.Logger) (*Audit, error) {
	return newAudit(ctx, db, path, holds, log, intervals{flush: FlushInterval, checkpoint: database.CheckpointInterval})
}

// intervals are the periods of an Audit's background work: the flush of
// DurabilityOS and the checkpoints of a SQLite database.
type intervals struct {
	flush, checkpoint time.Duration
}

// newAudit is NewAudit with the intervals of its background work.
func newAudit(ctx context.Context, db *DB, path string, holds HoldRows, log zerolog.Logger, every intervals) (*Audit, error) {
	insert, err := db.prepare(ctx, `INSERT INTO audit (ts_ms, kind, decision_id, body) VALUES (?, ?, ?, ?)`+db.returning("seq"))
	if err != nil {
		return nil, fmt.Errorf("new audit: %w", err)
	}
	charge, err := db.prepare(ctx, insertCharge+db.returning("id"))
	if err != nil {
		return nil, fmt.Errorf("new audit: %w", err)
	}
	a := &Audit{db: db, insert: insert, charge: charge, holds: holds, log: log, logLimit: engine.NewLogLimiter()}
	a.idle.L = &a.mu
	if path != "" {
		a.file = newJSONL(path, db.durability == DurabilityFull, log)
		if err := a.file.open(); err != nil {
			log.Error().Err(err).Msg("audit log unwritable: every decision is denied until it can be opened")
		} else if err := a.reconcile(ctx); err != nil {
			return nil, fmt.Errorf("new audit: %w", err)
		}
	}
	if db.durability == DurabilityOS {
		a.stop, a.stopped = make(chan struct{}), make(chan struct{})
		go a.flushLoop(every.flush)
	}
	if !db.pg {
		a.stopCheckpoints = database.Checkpoint(db.db, database.CheckpointConfig{Every: every.checkpoint, Exclusive: db.exclusive,
			Failed: func(err error) {
				a.log.Warn().Err(err).Str("path", db.path).
					Msg("ledger: the write-ahead log is not copied into the database file; it grows until a checkpoint succeeds")
			}})
		db.stopOnClose(a.stopCheckpoints)
	}
	return a, nil
}

// Writable checks that the JSONL file, if one is configured, can be
// appended to: its path opens for appending now (which creates the file if
// it is missing, as the next append would), and the last append, if any,
// succeeded. It does not touch the file the leader appends to.
func (a *Audit) Writable() error {
	if a.file == nil {
		return nil
	}
	f, err := os.OpenFile(a.file.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	_ = f.Close() // opened for the check only, nothing written
	if last := a.appendErr.Load(); last != nil && *last != nil {
		return fmt.Errorf("the last append failed: %w", *last)
	}
	return nil
}

// Record appends record (marshalled as JSON) under kind and returns once it
// is stored. Any error means the record may be missing.
func (a *Audit) Record(ctx context.Context, kind string, record any) error {
	if err := a.record(ctx, engine.Entry{Records: []engine.AuditRecord{{Kind: kind, Body: record}}}); err != nil {
		return fmt.Errorf("record audit %s: %w", kind, err)
	}
	return nil
}

// Commit appends the entry's records, in order, and stores its budget
// charge and hold write in the same batch: the lines in one write and
// fsync, the mirror rows, the charge and the hold row in one transaction.
// It returns once all are stored; an error means none of it was stored
// (short of a crash, or a failed undo, see commit). A hold write the store
// refuses (a consumption or a resolution that loses its compare-and-set
// fails with engine.ErrConflict) fails the entry alone and stores nothing
// of it; an entry carries one hold write at most. A charge of all zeros is not stored; an invalid one
// (no session or time, a negative count) fails before anything is written.
func (a *Audit) Commit(ctx context.Context, e engine.Entry) error {
	if len(e.Records) == 0 {
		return errors.New("commit audit: no record")
	}
	if c := e.Charge; c != nil {
		if err := validCharge(*c); err != nil {
			return fmt.Errorf("commit audit %s: charge session %q decision %q: %w",
				e.Records[0].Kind, c.SessionID, c.DecisionID, err)
		}
		if empty(*c) {
			e.Charge = nil
		}
	}
	if err := a.validHoldWrite(e); err != nil {
		return fmt.Errorf("commit audit %s: %w", e.Records[0].Kind, err)
	}
	if err := a.record(ctx, e); err != nil {
		return fmt.Errorf("commit audit %s: %w", e.Records[0].Kind, err)
	}
	return nil
}

// validHoldWrite checks that e carries one hold write at most, and none
// when there is no hold store.
func (a *Audit) validHoldWrite(e engine.Entry) error {
	n := 0
	for _, set := range []bool{e.Create != nil, e.Consume != nil, e.Resolve != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("an entry carries one hold write at most (create, consume or resolve)")
	case n == 1 && a.holds == nil:
		return errors.New("a hold write needs the hold store")
	}
	return nil
}

func (a *Audit) record(ctx context.Context, r engine.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := &entry{charge: r.Charge, create: r.Create, consume: r.Consume, resolve: r.Resolve,
		done: make(chan signal, 1)}
	for _, rec := range r.Records {
		l, err := a.line(rec)
		if err != nil {
			return err
		}
		e.lines = append(e.lines, l)
	}
	return a.submit(ctx, e)
}

// submit queues e and waits for the batch that carries it, leading it if no
// batch is in progress.
func (a *Audit) submit(ctx context.Context, e *entry) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errClosed
	}
	a.queue = append(a.queue, e)
	lead := !a.leading
	a.leading = true
	a.mu.Unlock()

	if !lead {
		if s := <-e.done; !s.lead {
			return s.err
		}
	}
	// Followers rely on the leader, so one caller's cancellation must not
	// fail the batch it leads.
	a.lead(context.WithoutCancel(ctx))
	return (<-e.done).err
}

func (a *Audit) line(r engine.AuditRecord) (line, error) {
	if r.Kind == "" {
		return line{}, errors.New("empty kind")
	}
	body, err := marshalRecord(r.Body)
	if err != nil {
		return line{}, fmt.Errorf("marshal %s record: %w", r.Kind, err)
	}
	return line{kind: r.Kind, decisionID: decisionIDOf(r.Body, body), tsMS: a.db.Now().UnixMilli(), body: body}, nil
}

// marshalRecord is json.Marshal(record), byte for byte; a decision record
// (engine.AuditedDecision), one per decision, is written without
// json.Marshal's reflection (AppendJSON). TestMarshalRecord checks the
// bytes against json.Marshal's.
func marshalRecord(record any) ([]byte, error) {
	if d, ok := record.(engine.AuditedDecision); ok {
		return d.AppendJSON(make([]byte, 0, auditLineSize+len(d.PolicyInput))), nil
	}
	return json.Marshal(record)
}

// auditLineSize is room for a decision record without its policy input.
const auditLineSize = 768

// decisionIDOf returns the decision_id of a record marshalled as line. The
// engine's own record types are read directly, sparing the decision path a
// second parse. Otherwise a record that is not an object, or whose
// decision_id is not a string, has none; Unmarshal's type errors say exactly
// that.
func decisionIDOf(record any, line []byte) string {
	switch r := record.(type) {
	case engine.DecisionEvent:
		return r.DecisionID
	case engine.AuditedDecision:
		return r.DecisionID
	case engine.DegradedDecisionEvent:
		return r.DecisionID
	case engine.HoldEvent:
		return r.DecisionID
	}
	var ids struct {
		DecisionID string `json:"decision_id"`
	}
	if line[0] == '{' {
		_ = json.Unmarshal(line, &ids)
	}
	return ids.DecisionID
}

// split separates the records of batch from its degraded records and its
// flush requests.
func split(batch []*entry) (records, degraded, flushes []*entry) {
	for _, e := range batch {
		switch {
		case e.flush:
			flushes = append(flushes, e)
		case e.degraded:
			degraded = append(degraded, e)
		default:
			records = append(records, e)
		}
	}
	return records, degraded, flushes
}

// lead commits everything queued, which includes the leader's own entry,
// answers each caller, then hands leadership to the oldest queued caller or
// gives it up.
func (a *Audit) lead(ctx context.Context) {
	a.mu.Lock()
	batch := a.queue
	a.queue = nil
	a.mu.Unlock()

	records, degraded, flushes := split(batch)
	var err error
	if p := a.flushErr.Load(); p != nil {
		err = *p
	}
	if err == nil && len(records) > 0 {
		err = a.commit(ctx, records)
		a.noteFileGone(err)
	}
	a.updateChargeCache(records, err)
	for _, e := range records {
		if e.err != nil && err == nil {
			e.done <- signal{err: e.err}
			continue
		}
		e.done <- signal{err: err}
	}
	if len(degraded) > 0 {
		a.salvage(ctx, degraded)
	}
	if len(flushes) > 0 {
		ferr := errors.Join(a.flush(), a.reopen(flushes))
		for _, e := range flushes {
			e.done <- signal{err: ferr}
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) > 0 {
		a.queue[0].done <- signal{lead: true}
		return
	}
	a.leading = false
	a.idle.Broadcast()
}

// Reopen closes the audit file and opens (creating it if missing) the one
// its path names now, as logrotate's postrotate SIGHUP asks: the rotated
// file is no longer held open, so it can be compressed or removed at once.
// It rides the queue as a flush request, so the leader does it between
// batches; a batch also reopens the file by itself when it finds the path
// naming another file (jsonl.current).
func (a *Audit) Reopen(ctx context.Context) error {
	if a.file == nil {
		return nil
	}
	if err := a.submit(ctx, &entry{flush: true, reopen: true, done: make(chan signal, 1)}); err != nil {
		return fmt.Errorf("reopen audit log: %w", err)
	}
	return nil
}

// reopen reopens the file if one of flushes asks for it.
func (a *Audit) reopen(flushes []*entry) error {
	for _, e := range flushes {
		if e.reopen {
			return a.file.reopen()
		}
	}
	return nil
}

// Close waits for queued records to be committed, ends the background
// flush, flushes everything to disk and closes the file. Records after Close
// fail. Close is idempotent; close the Audit before its DB.
func (a *Audit) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	for a.leading {
		a.idle.Wait()
	}
	a.mu.Unlock()
	if a.stopCheckpoints != nil {
		a.stopCheckpoints()
	}
	var err error
	if a.stop != nil {
		close(a.stop)
		<-a.stopped
		err = a.flush()
	}
	if a.file != nil {
		err = errors.Join(err, a.file.close())
	}
	return err
}

// AuditRow is one mirror row of the audit log.
type AuditRow struct {
	Seq        int64
	TS         time.Time
	Kind       string
	DecisionID string // "" when the record has none
	Body       json.RawMessage
}

// Records returns the mirror rows of kind ("" for all kinds) in commit
// order.
func (a *Audit) Records(ctx context.Context, kind string) ([]AuditRow, error) {
	rows, err := a.db.db.QueryContext(ctx, `SELECT seq, ts_ms, kind, COALESCE(decision_id, ''), body
		FROM audit WHERE ? = '' OR kind = ? ORDER BY seq`, kind, kind)
	if err != nil {
		return nil, fmt.Errorf("audit records %q: %w", kind, err)
	}
	defer func() { _ = rows.Close() }()
	var out []AuditRow
	for rows.Next() {
		var r AuditRow
		var ts int64
		var body string
		if err := rows.Scan(&r.Seq, &ts, &r.Kind, &r.DecisionID, &body); err != nil {
			return nil, fmt.Errorf("audit records %q: %w", kind, err)
		}
		r.TS, r.Body = time.UnixMilli(ts), json.RawMessage(body)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit records %q: %w", kind, err)
	}
	return out, nil
}
