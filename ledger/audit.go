package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/svc-dev/svc/engine"
)

var _ engine.Journal = (*Audit)(nil)

// errClosed is returned by Record after Close.
var errClosed = errors.New("audit log closed")

// Audit is the audit log: one JSON line per record in an append-only file
// (when a path is configured) and a mirror row in SQLite. Record returns
// only once its record is durable in both; the two writes of a batch succeed
// or fail together.
//
// Concurrent Records are group-committed, leader/follower style: the caller
// that finds no commit in progress becomes the leader and commits everything
// queued (one write, one fsync, one transaction); callers arriving meanwhile
// queue and wait, and the oldest of them leads the next batch. A lone caller
// commits at once; there is no flush timer. Commit puts all the records of
// a decision and its budget charge in one batch, so a decision costs the
// decision path one batch rather than a charge commit and a batch per
// record.
type Audit struct {
	db     *DB
	insert *sql.Stmt
	charge *sql.Stmt
	file   *jsonl // nil when no audit path is configured

	mu      sync.Mutex
	idle    sync.Cond // signalled when leading becomes false
	queue   []*entry
	leading bool
	closed  bool
}

// entry is one caller's records and charge, waiting for their batch.
type entry struct {
	lines  []line
	charge *engine.Charge // nil when there is none
	done   chan signal    // receives lead (at most once), then the result
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
// when path is not empty. A file that cannot be opened does not fail
// construction: the error is logged, every Record fails (so the engine
// denies) and retries the open until it succeeds.
func NewAudit(ctx context.Context, db *DB, path string, log zerolog.Logger) (*Audit, error) {
	insert, err := db.prepare(ctx, `INSERT INTO audit (ts_ms, kind, decision_id, body) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("new audit: %w", err)
	}
	charge, err := db.prepare(ctx, insertCharge)
	if err != nil {
		return nil, fmt.Errorf("new audit: %w", err)
	}
	a := &Audit{db: db, insert: insert, charge: charge}
	a.idle.L = &a.mu
	if path != "" {
		a.file = &jsonl{path: path, log: log}
		if err := a.file.open(); err != nil {
			log.Error().Err(err).Msg("audit log unwritable: every decision is denied until it can be opened")
		}
	}
	return a, nil
}

// Record appends record (marshalled as JSON) under kind and returns once it
// is durable. Any error means the record may be missing.
func (a *Audit) Record(ctx context.Context, kind string, record any) error {
	if err := a.record(ctx, []engine.AuditRecord{{Kind: kind, Body: record}}, nil); err != nil {
		return fmt.Errorf("record audit %s: %w", kind, err)
	}
	return nil
}

// Commit appends records, in order, and stores the budget charge c (when
// not nil) in the same batch: the lines in one write and fsync, the mirror
// rows and the charge in one transaction. It returns once all are durable;
// an error means c was not stored and, as with Record, that the records may
// be missing. A charge of all zeros is not stored; an invalid one (no
// session or time, a negative count) fails before anything is written.
func (a *Audit) Commit(ctx context.Context, records []engine.AuditRecord, c *engine.Charge) error {
	if len(records) == 0 {
		return errors.New("commit audit: no record")
	}
	if c != nil {
		if err := validCharge(*c); err != nil {
			return fmt.Errorf("commit audit %s: charge session %q decision %q: %w",
				records[0].Kind, c.SessionID, c.DecisionID, err)
		}
		if c.Totals == (engine.Totals{}) {
			c = nil
		}
	}
	if err := a.record(ctx, records, c); err != nil {
		return fmt.Errorf("commit audit %s: %w", records[0].Kind, err)
	}
	return nil
}

func (a *Audit) record(ctx context.Context, records []engine.AuditRecord, charge *engine.Charge) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := &entry{charge: charge, done: make(chan signal, 1)}
	for _, r := range records {
		l, err := a.line(r)
		if err != nil {
			return err
		}
		e.lines = append(e.lines, l)
	}
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
	body, err := json.Marshal(r.Body)
	if err != nil {
		return line{}, fmt.Errorf("marshal %s record: %w", r.Kind, err)
	}
	return line{kind: r.Kind, decisionID: decisionIDOf(r.Body, body), tsMS: a.db.Now().UnixMilli(), body: body}, nil
}

// decisionIDOf returns the decision_id of a record marshalled as line. The
// engine's own record types are read directly, sparing the decision path a
// second parse. Otherwise a record that is not an object, or whose
// decision_id is not a string, has none; Unmarshal's type errors say exactly
// that.
func decisionIDOf(record any, line []byte) string {
	switch r := record.(type) {
	case engine.DecisionEvent:
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

// lead commits everything queued, which includes the leader's own entry,
// answers each caller, then hands leadership to the oldest queued caller or
// gives it up.
func (a *Audit) lead(ctx context.Context) {
	a.mu.Lock()
	batch := a.queue
	a.queue = nil
	a.mu.Unlock()

	err := a.commit(ctx, batch)
	for _, e := range batch {
		e.done <- signal{err: err}
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

// commit writes batch to the JSONL file and then to the mirror. If the
// mirror fails, the lines are truncated away again, so that an error always
// means neither copy holds the batch (short of a crash in between, which
// leaves lines no caller was told about).
func (a *Audit) commit(ctx context.Context, batch []*entry) error {
	if a.file == nil {
		return a.mirror(ctx, batch)
	}
	var buf bytes.Buffer
	for _, e := range batch {
		for _, l := range e.lines {
			buf.Write(l.body)
			buf.WriteByte('\n')
		}
	}
	size, err := a.file.append(buf.Bytes())
	if err != nil {
		return err
	}
	if err := a.mirror(ctx, batch); err != nil {
		a.file.rollback(size)
		return err
	}
	return nil
}

// mirror inserts the batch's rows and charges in one transaction.
func (a *Audit) mirror(ctx context.Context, batch []*entry) error {
	err := a.db.write(ctx, func(tx *sql.Tx) error {
		insert, charge := tx.StmtContext(ctx, a.insert), tx.StmtContext(ctx, a.charge)
		for _, e := range batch {
			for _, l := range e.lines {
				id := sql.NullString{String: l.decisionID, Valid: l.decisionID != ""}
				if _, err := insert.ExecContext(ctx, l.tsMS, l.kind, id, string(l.body)); err != nil {
					return err
				}
			}
			if e.charge == nil {
				continue
			}
			if err := execCharge(ctx, charge, *e.charge); err != nil {
				return fmt.Errorf("charge session %q decision %q: %w", e.charge.SessionID, e.charge.DecisionID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mirror audit batch: %w", err)
	}
	return nil
}

// Close waits for queued records to be committed, then closes the file.
// Records after Close fail. Close is idempotent; close the Audit before its
// DB.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	for a.leading {
		a.idle.Wait()
	}
	if a.file == nil {
		return nil
	}
	return a.file.close()
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
