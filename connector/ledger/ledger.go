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
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"github.com/svc-dev/svc/connector"
)

// pragmas of every connection: WAL, a wait for a lock another process
// holds, and a commit synced to disk before the answer (synchronous=FULL).
const pragmas = "_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_synchronous=FULL"

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
	key_alias               TEXT
);
CREATE INDEX IF NOT EXISTS gateway_ledger_ts ON gateway_ledger (ts);`

const columns = `ts, decision_id, outcome, verdict, rule, reason, envelope_hash, org, session, tool, tool_call_id,
	enforcement_stage, released_after_approval, hold_id, hold_decision, transport, api_base_host, deployment_id,
	provider, mode, enforced, model, classified_by, gateway_call_id, key_alias`

// Ledger is the gateway ledger database.
type Ledger struct {
	db *sql.DB
}

var _ connector.Recorder = (*Ledger)(nil)

// Open opens (creating it if needed) the ledger at path. An empty path or
// ":memory:" keeps the rows in memory only, lost at exit.
func Open(ctx context.Context, path string) (*Ledger, error) {
	dsn := path + "?" + pragmas
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
	if _, err := db.ExecContext(ctx, schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open gateway ledger %s: %w", path, err)
	}
	return &Ledger{db: db}, nil
}

// Close closes the database.
func (l *Ledger) Close() error { return l.db.Close() }

// Record writes the rows of one request in one transaction.
func (l *Ledger) Record(ctx context.Context, rows []connector.Row) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record gateway ledger rows: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO gateway_ledger (`+columns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("record gateway ledger rows: %w", err)
	}
	defer stmt.Close()
	for _, r := range rows {
		var hd *string
		if r.HoldDecision != nil {
			raw, err := json.Marshal(r.HoldDecision)
			if err != nil {
				return fmt.Errorf("record gateway ledger rows: %w", err)
			}
			s := string(raw)
			hd = &s
		}
		if _, err := stmt.ExecContext(ctx, r.Time.UTC().Format(time.RFC3339Nano), r.DecisionID, r.Outcome, r.Verdict, r.Rule,
			r.Reason, r.EnvelopeHash, r.Org, r.Session, r.Tool, r.ToolCallID, r.EnforcementStage, r.ReleasedAfterApproval,
			r.HoldID, hd, r.Transport, r.APIBaseHost, r.DeploymentID, r.Provider, r.Mode, r.Enforced, r.Model,
			r.ClassifiedBy, r.GatewayCallID, r.KeyAlias); err != nil {
			return fmt.Errorf("record gateway ledger rows: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record gateway ledger rows: %w", err)
	}
	return nil
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
		var hd *string
		if err := rows.Scan(&ts, &r.DecisionID, &r.Outcome, &r.Verdict, &r.Rule, &r.Reason, &r.EnvelopeHash, &r.Org,
			&r.Session, &r.Tool, &r.ToolCallID, &r.EnforcementStage, &r.ReleasedAfterApproval, &r.HoldID, &hd,
			&r.Transport, &r.APIBaseHost, &r.DeploymentID, &r.Provider, &r.Mode, &r.Enforced, &r.Model,
			&r.ClassifiedBy, &r.GatewayCallID, &r.KeyAlias); err != nil {
			return nil, fmt.Errorf("read gateway ledger: %w", err)
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
