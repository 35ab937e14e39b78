// Package ledger is the connector's gateway ledger (gateway spec §2.3): one
// SQLite row per governed tool call, written — and synced to disk — before
// the gateway is answered. Rows never hold the model's prose or a key.
package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"github.com/svc-dev/svc/connector"
)

// pragmas of every connection: WAL and a wait for a lock another process
// holds; the synchronous setting follows the durability.
const pragmas = "_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate"

// schema is the gateway ledger's table; columns follow connector.Row.
const schema = `CREATE TABLE IF NOT EXISTS gateway_ledger (
	seq                     INTEGER PRIMARY KEY AUTOINCREMENT,
	ts                      TEXT NOT NULL,
	decision_id             TEXT,
	outcome                 TEXT NOT NULL,
	verdict                 TEXT,
	rule                    TEXT NOT NULL,
	reason                  TEXT NOT NULL,
	envelope_hash           TEXT,
	org                     TEXT,
	session                 TEXT,
	tool                    TEXT NOT NULL,
	tool_call_id            TEXT NOT NULL,
	enforcement_stage       TEXT NOT NULL CHECK (enforcement_stage IN ('refused_at_gateway', 'allowed_at_gateway')),
	released_after_approval INTEGER NOT NULL,
	hold_id                 TEXT,
	hold_decision           TEXT,
	transport               TEXT NOT NULL,
	api_base_host           TEXT,
	deployment_id           TEXT,
	provider                TEXT,
	mode                    TEXT NOT NULL,
	enforced                INTEGER NOT NULL,
	model                   TEXT NOT NULL,
	classified_by           TEXT NOT NULL,
	gateway_call_id         TEXT NOT NULL,
	key_alias               TEXT,
	obligations             TEXT NOT NULL DEFAULT '[]',
	params                  TEXT
);
CREATE INDEX IF NOT EXISTS gateway_ledger_ts ON gateway_ledger (ts);`

// added are the columns added since the first release of the table, with
// their definitions: a ledger file of an older connector gets them at Open.
var added = [][2]string{
	{"obligations", "TEXT NOT NULL DEFAULT '[]'"},
	{"params", "TEXT"},
}

const columns = `ts, decision_id, outcome, verdict, rule, reason, envelope_hash, org, session, tool, tool_call_id,
	enforcement_stage, released_after_approval, hold_id, hold_decision, transport, api_base_host, deployment_id,
	provider, mode, enforced, model, classified_by, gateway_call_id, key_alias, obligations, params`

// Ledger is the gateway ledger database. Rows of concurrent requests are
// committed together (group commit): one writer takes every batch queued
// while the previous commit was syncing, so that under load a sync serves
// many requests instead of queueing them one sync each.
type Ledger struct {
	db      *sql.DB
	queue   chan *batch
	closing chan struct{}
	done    chan struct{}
	once    sync.Once
}

// batch is the rows of one request and where its commit's result goes.
type batch struct {
	rows []connector.Row
	err  chan error
}

// maxGroup bounds the requests committed in one transaction.
const maxGroup = 256

var _ connector.Recorder = (*Ledger)(nil)

// Open opens (creating it if needed) the ledger at path. An empty path or
// ":memory:" keeps the rows in memory only, lost at exit. With synced, a
// commit is on disk before Record returns (synchronous=FULL, as
// SVC_DURABILITY=full); without, it is written to the operating system and
// survives a crash of the connector but not of the machine
// (synchronous=NORMAL, SVC_DURABILITY=os).
func Open(ctx context.Context, path string, synced bool) (*Ledger, error) {
	dsn := path + "?" + pragmas + "&_synchronous=NORMAL"
	if synced {
		dsn = path + "?" + pragmas + "&_synchronous=FULL"
	}
	if connector.InMemory(path) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		dsn = "file:svc-gateway-" + hex.EncodeToString(b[:]) + "?mode=memory&cache=shared&_busy_timeout=5000&_txlock=immediate"
	} else if strings.ContainsRune(path, '?') {
		return nil, errors.New("ledger path must not contain '?'")
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open gateway ledger: %w", err)
	}
	// One connection: writes are serialised in the process rather than
	// retried on SQLite's lock, and a shared in-memory database lives as
	// long as its connection.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open gateway ledger %s: %w", path, err)
	}
	l := &Ledger{db: db, queue: make(chan *batch, maxGroup), closing: make(chan struct{}), done: make(chan struct{})}
	go l.write()
	return l, nil
}

// migrate creates the table, and adds to a table of an older connector the
// columns it lacks.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}
	have := map[string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('gateway_ledger')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, col := range added {
		if !have[col[0]] {
			if _, err := db.ExecContext(ctx, `ALTER TABLE gateway_ledger ADD COLUMN `+col[0]+` `+col[1]); err != nil {
				return fmt.Errorf("add column %s: %w", col[0], err)
			}
		}
	}
	return nil
}

// Close stops the writer once its commit in progress is done (a Record
// still queued fails, so its request is refused) and closes the database.
// It is idempotent.
func (l *Ledger) Close() error {
	l.once.Do(func() { close(l.closing) })
	<-l.done
	return l.db.Close()
}

// errClosed answers a Record after Close.
var errClosed = errors.New("gateway ledger is closed")

// Record writes the rows of one request, returning once they are
// committed (with another request's, perhaps) or failed.
func (l *Ledger) Record(ctx context.Context, rows []connector.Row) error {
	b := &batch{rows: rows, err: make(chan error, 1)}
	select {
	case l.queue <- b:
	case <-l.closing:
		return errClosed
	case <-ctx.Done():
		return fmt.Errorf("record gateway ledger rows: %w", ctx.Err())
	}
	select {
	case err := <-b.err:
		return err
	case <-l.done:
		return errClosed
	}
}

// write commits the queued batches, as many as are waiting at once.
func (l *Ledger) write() {
	defer close(l.done)
	for {
		var group []*batch
		select {
		case b := <-l.queue:
			group = append(group, b)
		case <-l.closing:
			return
		}
	more:
		for len(group) < maxGroup {
			select {
			case b := <-l.queue:
				group = append(group, b)
			default:
				break more
			}
		}
		err := l.commit(group)
		for _, b := range group {
			b.err <- err
		}
	}
}

// commit writes the rows of a group in one transaction.
func (l *Ledger) commit(group []*batch) error {
	ctx := context.Background() // a caller that leaves does not undo the rows of the others
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record gateway ledger rows: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO gateway_ledger (`+columns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("record gateway ledger rows: %w", err)
	}
	defer stmt.Close()
	for _, r := range rowsOf(group) {
		var hd *string
		if r.HoldDecision != nil {
			raw, err := json.Marshal(r.HoldDecision)
			if err != nil {
				return fmt.Errorf("record gateway ledger rows: %w", err)
			}
			s := string(raw)
			hd = &s
		}
		obligations, err := json.Marshal(append([]string{}, r.Obligations...))
		if err != nil {
			return fmt.Errorf("record gateway ledger rows: %w", err)
		}
		var params *string
		if r.Params != nil {
			s := string(r.Params)
			params = &s
		}
		if _, err := stmt.ExecContext(ctx, r.Time.UTC().Format(time.RFC3339Nano), r.DecisionID, r.Outcome, r.Verdict, r.Rule,
			r.Reason, r.EnvelopeHash, r.Org, r.Session, r.Tool, r.ToolCallID, r.EnforcementStage, r.ReleasedAfterApproval,
			r.HoldID, hd, r.Transport, r.APIBaseHost, r.DeploymentID, r.Provider, r.Mode, r.Enforced, r.Model,
			r.ClassifiedBy, r.GatewayCallID, r.KeyAlias, string(obligations), params); err != nil {
			return fmt.Errorf("record gateway ledger rows: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record gateway ledger rows: %w", err)
	}
	return nil
}

func rowsOf(group []*batch) []connector.Row {
	var out []connector.Row
	for _, b := range group {
		out = append(out, b.rows...)
	}
	return out
}

// Recent lists the last limit rows, newest first.
func (l *Ledger) Recent(ctx context.Context, limit int) ([]connector.Row, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT `+columns+` FROM gateway_ledger ORDER BY seq DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("read gateway ledger: %w", err)
	}
	defer rows.Close()
	out := []connector.Row{}
	for rows.Next() {
		var r connector.Row
		var ts string
		var hd, params *string
		var obligations string
		if err := rows.Scan(&ts, &r.DecisionID, &r.Outcome, &r.Verdict, &r.Rule, &r.Reason, &r.EnvelopeHash, &r.Org,
			&r.Session, &r.Tool, &r.ToolCallID, &r.EnforcementStage, &r.ReleasedAfterApproval, &r.HoldID, &hd,
			&r.Transport, &r.APIBaseHost, &r.DeploymentID, &r.Provider, &r.Mode, &r.Enforced, &r.Model,
			&r.ClassifiedBy, &r.GatewayCallID, &r.KeyAlias, &obligations, &params); err != nil {
			return nil, fmt.Errorf("read gateway ledger: %w", err)
		}
		if err := json.Unmarshal([]byte(obligations), &r.Obligations); err != nil {
			return nil, fmt.Errorf("read gateway ledger: obligations: %w", err)
		}
		if params != nil {
			r.Params = json.RawMessage(*params)
		}
		r.Time, _ = time.Parse(time.RFC3339Nano, ts) // written by Record in this format
		if hd != nil {
			r.HoldDecision = &connector.HoldDecision{}
			if err := json.Unmarshal([]byte(*hd), r.HoldDecision); err != nil {
				return nil, fmt.Errorf("read gateway ledger: hold_decision: %w", err)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// pruneBatch is the most rows one transaction of Prune deletes, and
// prunePause the pause between two, which leaves the one connection to
// the writer of the gateway's requests.
const (
	pruneBatch = 500
	prunePause = 20 * time.Millisecond
)

// Prune deletes the rows written before before, pruneBatch rows a
// transaction, and returns how many it deleted. Times are compared to the
// second.
func (l *Ledger) Prune(ctx context.Context, before time.Time) (int64, error) {
	cutoff := before.UTC().Format(time.RFC3339)
	var total int64
	for {
		res, err := l.db.ExecContext(ctx, `DELETE FROM gateway_ledger WHERE seq IN (
			SELECT seq FROM gateway_ledger WHERE ts < ? ORDER BY ts LIMIT ?)`, cutoff, pruneBatch)
		if err != nil {
			return total, fmt.Errorf("prune gateway ledger: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("prune gateway ledger: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(prunePause):
		}
	}
}
