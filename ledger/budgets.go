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

// Budgets reads the ledger of charges. Each charge is its own row, naming
// the session, agent and principal it is counted against, so a subject's
// totals over any window are a sum over an index range and the rolling
// window needs no bucket maintenance; Prune bounds the table. The charges
// of recently used subjects are also kept in memory (see chargeCache), so
// most reads do not query SQLite.
type Budgets struct {
	db    *DB
	reads map[engine.Scope]scopeReads
	prune *sql.Stmt
}

// scopeReads are the statements that read one scope's charges: its
// charges, for the cache, and their sums per currency, for a subject with
// too many to cache.
type scopeReads struct {
	charges, sums *sql.Stmt
}

// scopeColumns are the charges columns that name each scope's subject.
var scopeColumns = map[engine.Scope]string{
	engine.ScopeSession:   "session_id",
	engine.ScopeAgent:     "agent_id",
	engine.ScopePrincipal: "principal_id",
}

// insertCharge stores one charge. Charges are written only by
// Audit.Commit, with the decision record they belong to.
const insertCharge = `INSERT INTO charges (session_id, agent_id, principal_id, decision_id, at_ms,
	deletes, external_sends, objects, currency, amount) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// NewBudgets prepares the ledger's statements on db; db.Close releases them.
func NewBudgets(ctx context.Context, db *DB) (*Budgets, error) {
	b := Budgets{db: db, reads: map[engine.Scope]scopeReads{}}
	prepare := func(query string) (*sql.Stmt, error) {
		stmt, err := db.prepare(ctx, query)
		if err != nil {
			return nil, fmt.Errorf("new budgets: %w", err)
		}
		return stmt, nil
	}
	var err error
	for scope, column := range scopeColumns {
		var r scopeReads
		if r.charges, err = prepare(`SELECT at_ms, deletes, external_sends, objects, currency, amount
			FROM charges WHERE ` + column + ` = ? AND at_ms >= ? ORDER BY at_ms, id LIMIT ` + strconv.Itoa(cacheCharges+1)); err != nil {
			return nil, err
		}
		if r.sums, err = prepare(`SELECT currency, CAST(SUM(deletes) AS BIGINT), CAST(SUM(external_sends) AS BIGINT),
			CAST(SUM(objects) AS BIGINT), CAST(SUM(amount) AS BIGINT)
			FROM charges WHERE ` + column + ` = ? AND at_ms >= ? GROUP BY currency`); err != nil {
			return nil, err
		}
		b.reads[scope] = r
	}
	if b.prune, err = prepare(`DELETE FROM charges WHERE at_ms < ?`); err != nil {
		return nil, err
	}
	return &b, nil
}

// Usage sums the charges of the subject id of scope made at or after since:
// from the cache, else from SQLite, caching the subject's charges when
// there are few enough to keep (cacheCharges); a subject with more is
// summed by SQLite (which fails on an integer overflow rather than wrap),
// without reading its charges again for its next tooManySkips reads.
func (b *Budgets) Usage(ctx context.Context, scope engine.Scope, id string, since time.Time) (engine.Usage, error) {
	reads, ok := b.reads[scope]
	if !ok {
		return engine.Usage{}, fmt.Errorf("budget totals: unknown scope %q", scope)
	}
	key, sinceMS := cacheKey(scope, id), since.UnixMilli()
	if b.db.pg { // other replicas charge the subject too: no cache
		u, err := sums(ctx, reads.sums, id, sinceMS)
		if err != nil {
			return engine.Usage{}, fmt.Errorf("budget totals of %s %q: %w", scope, id, err)
		}
		return u, nil
	}
	if u, ok := b.db.charges.usage(key, sinceMS); ok {
		return u, nil
	}
	if !b.db.charges.tooMany(key) {
		charges, err := b.charges(ctx, reads.charges, id, sinceMS)
		if err != nil {
			return engine.Usage{}, fmt.Errorf("budget totals of %s %q: %w", scope, id, err)
		}
		if u, ok := b.db.charges.load(key, sinceMS, charges); ok {
			return u, nil
		}
		if len(charges) > cacheCharges {
			b.db.charges.markTooMany(key)
		}
	}
	u, err := sums(ctx, reads.sums, id, sinceMS)
	if err != nil {
		return engine.Usage{}, fmt.Errorf("budget totals of %s %q: %w", scope, id, err)
	}
	return u, nil
}

// charges reads a subject's charges at or after sinceMS with stmt, oldest
// first, up to one more than the cache keeps.
func (b *Budgets) charges(ctx context.Context, stmt *sql.Stmt, id string, sinceMS int64) ([]cachedCharge, error) {
	rows, err := stmt.QueryContext(ctx, id, sinceMS)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []cachedCharge
	for rows.Next() {
		var c cachedCharge
		if err := rows.Scan(&c.atMS, &c.Deletes, &c.ExternalSends, &c.Objects, &c.currency, &c.amount); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// sums reads a subject's sums per currency at or after sinceMS with stmt.
func sums(ctx context.Context, stmt *sql.Stmt, id string, sinceMS int64) (engine.Usage, error) {
	rows, err := stmt.QueryContext(ctx, id, sinceMS)
	if err != nil {
		return engine.Usage{}, err
	}
	defer func() { _ = rows.Close() }()
	u := engine.Usage{Money: engine.Amounts{}}
	for rows.Next() {
		var currency string
		var t engine.Totals
		var amount int64
		if err := rows.Scan(&currency, &t.Deletes, &t.ExternalSends, &t.Objects, &amount); err != nil {
			return engine.Usage{}, err
		}
		u.Deletes += t.Deletes
		u.ExternalSends += t.ExternalSends
		u.Objects += t.Objects
		if currency != "" && amount > 0 {
			u.Money[currency] = amount
		}
	}
	return u, rows.Err()
}

// chargeArgs are the arguments of insertCharge for c.
func chargeArgs(c engine.Charge) []any {
	return []any{c.SessionID, c.AgentID, c.PrincipalID, c.DecisionID, c.At.UnixMilli(),
		c.Deletes, c.ExternalSends, c.Objects, c.Currency, c.Amount}
}

func validCharge(c engine.Charge) error {
	switch {
	case c.SessionID == "":
		return errors.New("empty session id")
	case c.At.IsZero():
		return errors.New("zero charge time")
	case c.Deletes < 0 || c.ExternalSends < 0 || c.Objects < 0 || c.Amount < 0:
		return fmt.Errorf("negative charge %+v, amount %d", c.Totals, c.Amount)
	case (c.Currency == "") != (c.Amount == 0):
		return fmt.Errorf("amount %d in currency %q", c.Amount, c.Currency)
	}
	return nil
}

// empty reports whether c charges nothing.
func empty(c engine.Charge) bool {
	return c.Totals == (engine.Totals{}) && c.Amount == 0
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
