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

var _ engine.Recorder = (*Audit)(nil)

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
// commits at once; there is no flush timer.
type Audit struct {
	db     *DB
	insert *sql.Stmt
	file   *jsonl // nil when no audit path is configured

	mu      sync.Mutex
	idle    sync.Cond // signalled when leading becomes false
	queue   []*entry
	leading bool
	closed  bool
}

// entry is one record waiting for its batch.
type entry struct {
	kind       string
	decisionID string
	tsMS       int64
	line       []byte      // the JSON record, without newline
	done       chan signal // receives lead (at most once), then the result
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
	a := &Audit{db: db, insert: insert}
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
	if err := a.record(ctx, kind, record); err != nil {
		return fmt.Errorf("record audit %s: %w", kind, err)
	}
	return nil
}

func (a *Audit) record(ctx context.Context, kind string, record any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, err := a.entry(kind, record)
	if err != nil {
		return err
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

func (a *Audit) entry(kind string, record any) (*entry, error) {
	if kind == "" {
		return nil, errors.New("empty kind")
	}
	line, err := json.Marshal(record)
	if err != nil {
		return nil, fmt.Errorf("marshal record: %w", err)
	}
	// A record that is not an object, or whose decision_id is not a string,
	// has no decision id; Unmarshal's type errors say exactly that.
	var ids struct {
		DecisionID string `json:"decision_id"`
	}
	if line[0] == '{' {
		_ = json.Unmarshal(line, &ids)
	}
	return &entry{
		kind:       kind,
		decisionID: ids.DecisionID,
		tsMS:       a.db.Now().UnixMilli(),
		line:       line,
		done:       make(chan signal, 1),
	}, nil
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
		buf.Write(e.line)
		buf.WriteByte('\n')
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

// mirror inserts the batch's rows in one transaction.
func (a *Audit) mirror(ctx context.Context, batch []*entry) error {
	err := a.db.write(ctx, func(tx *sql.Tx) error {
		insert := tx.StmtContext(ctx, a.insert)
		for _, e := range batch {
			id := sql.NullString{String: e.decisionID, Valid: e.decisionID != ""}
			if _, err := insert.ExecContext(ctx, e.tsMS, e.kind, id, string(e.line)); err != nil {
				return err
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
